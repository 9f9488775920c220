// The policy file: what it reads, what it refuses (with file:line:column),
// what it only warns about, who gets which setting (precedence), and what a
// request becomes under it (clamp_to_policy).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gpulimit/server/daemon/command_line.h"
#include "gpulimit/server/policy/limits_policy.h"
#include "gpulimit/server/policy/policy.h"
#include "gpulimit/server/policy/policy_file.h"

namespace gpulimit::server {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uid_t kAlice = 1000;
constexpr uid_t kBob = 1001;
constexpr gid_t kUsers = 100;
constexpr gid_t kMl = 2000;
constexpr gid_t kStudents = 2001;

const char* const kGpu0Text = "GPU-00000000-0000-0000-0000-000000000000";
const char* const kGpu1Text = "GPU-11111111-2222-3333-4444-555555555555";

GpuUuid uuid_of(const char* text) {
  GpuUuid uuid{};
  EXPECT_TRUE(parse_gpu_uuid(text, uuid)) << text;
  return uuid;
}

// A machine of two GPUs with users alice and bob, groups users, ml and
// students, and no NSS or NVML asked.
PolicyLookups test_lookups() {
  static const std::map<std::string, unsigned> kUserIds = {{"alice", kAlice}, {"bob", kBob}};
  static const std::map<std::string, unsigned> kGroupIds = {
      {"users", kUsers}, {"ml", kMl}, {"students", kStudents}};
  PolicyLookups lookups;
  lookups.user_id = [](const std::string& name) -> std::optional<uid_t> {
    const auto found = kUserIds.find(name);
    if (found == kUserIds.end()) return std::nullopt;
    return found->second;
  };
  lookups.group_id = [](const std::string& name) -> std::optional<gid_t> {
    const auto found = kGroupIds.find(name);
    if (found == kGroupIds.end()) return std::nullopt;
    return found->second;
  };
  lookups.uid_known = [](uid_t uid) { return uid == kAlice || uid == kBob; };
  lookups.gid_known = [](gid_t gid) { return gid == kUsers || gid == kMl || gid == kStudents; };
  lookups.gpus = []() -> Result<std::vector<GpuUuid>> {
    return std::vector<GpuUuid>{uuid_of(kGpu0Text), uuid_of(kGpu1Text)};
  };
  return lookups;
}

Result<LoadedPolicy> parse(const std::string& text) {
  return parse_policy(text, "policy.toml", test_lookups());
}

std::shared_ptr<const Policy> parse_good(const std::string& text) {
  Result<LoadedPolicy> loaded = parse(text);
  EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.error());
  return loaded.ok() ? loaded->policy : std::make_shared<Policy>();
}

// The one-line error of a file that must be refused.
std::string error_of(const std::string& text) {
  Result<LoadedPolicy> loaded = parse(text);
  EXPECT_FALSE(loaded.ok()) << text;
  return loaded.ok() ? std::string() : loaded.error();
}

PeerIdentity alice_in(std::vector<gid_t> groups) {
  return PeerIdentity{kAlice, std::move(groups)};
}

// ---------------------------------------------------------------------------
// Reading

TEST(PolicyFile, ReadsEverySettingOfAnEntry) {
  const auto sut = parse_good(R"(
[defaults]
memory = "8G"
max_memory = "50%"
sm = 50
max_sm = "80%"
weight = 1
max_weight = 4
priority = "low"
max_priority = "normal"
devices = [0, "GPU-11111111-2222-3333-4444-555555555555"]
unmanaged = "warn"
)");

  const PolicySettings& all = sut->defaults.all_devices;
  EXPECT_EQ(all.memory, (options::Amount{options::Amount::Kind::kBytes, 8 * kGiB}));
  EXPECT_EQ(all.max_memory, (options::Amount{options::Amount::Kind::kPercent, 50}));
  EXPECT_EQ(all.sm, 50u);
  EXPECT_EQ(all.max_sm, 80u);
  EXPECT_EQ(all.weight, 1u);
  EXPECT_EQ(all.max_weight, 4u);
  EXPECT_EQ(all.priority, protocol::Priority::kLow);
  EXPECT_EQ(all.max_priority, protocol::Priority::kNormal);
  EXPECT_EQ(sut->defaults.allowed_devices,
            (std::vector<GpuUuid>{uuid_of(kGpu0Text), uuid_of(kGpu1Text)}));
  EXPECT_EQ(sut->defaults.unmanaged, UnmanagedAction::kWarn);
}

TEST(PolicyFile, NamesUsersAndGroupsByNameOrNumberAndDevicesByUuidOrIndex) {
  const auto sut = parse_good(R"(
[users.alice]
max_weight = 8
[users.1001]
max_weight = 2
[groups.ml.device.1]
max_memory = "10G"
[groups.2001.device."GPU-00000000-0000-0000-0000-000000000000"]
max_memory = "2G"
)");

  EXPECT_EQ(sut->users.at(kAlice).all_devices.max_weight, 8u);
  EXPECT_EQ(sut->users.at(kBob).all_devices.max_weight, 2u);
  EXPECT_EQ(sut->groups.at(kMl).device.at(uuid_of(kGpu1Text)).max_memory,
            (options::Amount{options::Amount::Kind::kBytes, 10 * kGiB}));
  EXPECT_EQ(sut->groups.at(kStudents).device.at(uuid_of(kGpu0Text)).max_memory,
            (options::Amount{options::Amount::Kind::kBytes, 2 * kGiB}));
}

TEST(PolicyFile, AnEmptyFileIsAPolicyThatLimitsNothing) {
  const auto sut = parse_good("");

  const EffectiveLimits limits = sut->limits_for(alice_in({kUsers}), nullptr, 0);
  EXPECT_FALSE(limits.memory || limits.max_memory || limits.sm || limits.max_sm || limits.weight ||
               limits.max_weight || limits.priority || limits.max_priority);
  EXPECT_EQ(sut->unmanaged_action(alice_in({kUsers})), UnmanagedAction::kAllow);
  EXPECT_EQ(sut->unmanaged_action(alice_in({kUsers}), UnmanagedAction::kWarn),
            UnmanagedAction::kWarn);
}

TEST(PolicyFile, ASyntaxErrorIsRefusedWithItsLineAndColumn) {
  const std::string sut = error_of("[defaults]\nweight = = 2\n");

  EXPECT_EQ(sut.rfind("policy.toml:2:10: ", 0), 0u) << sut;
  EXPECT_EQ(sut.find('\n'), std::string::npos);
}

TEST(PolicyFile, ImpossibleValuesAreRefusedWithWhereAndWhy) {
  EXPECT_EQ(error_of("[defaults]\nweight = 0\n"),
            "policy.toml:2:10: weight 0: not a whole number from 1 to 1000");
  EXPECT_EQ(error_of("[users.alice]\nmax_sm = 150\n")
                .rfind("policy.toml:2:10: max_sm 150: not a percentage from 1 to 100", 0),
            0u);
  EXPECT_EQ(error_of("[groups.ml]\nmemory = \"banana\"\n")
                .rfind("policy.toml:2:10: memory \"banana\": not a size", 0),
            0u);
  EXPECT_EQ(error_of("[defaults]\nmax_memory = \"0\"\n"),
            "policy.toml:2:14: max_memory \"0\": zero is not a cap (examples: 10G, 512M, 50%)");
  EXPECT_EQ(
      error_of("[defaults]\npriority = \"urgent\"\n"),
      "policy.toml:2:12: priority \"urgent\": not a priority (\"high\", \"normal\" or \"low\")");
  EXPECT_EQ(error_of("[defaults]\nunmanaged = \"ignore\"\n"),
            "policy.toml:2:13: unmanaged \"ignore\": not \"allow\", \"warn\" or \"kill\"");
  EXPECT_EQ(error_of("[defaults]\nsm = true\n"),
            "policy.toml:2:6: sm true: not a percentage from 1 to 100");
}

TEST(PolicyFile, AMaximumBelowItsDefaultIsRefused) {
  EXPECT_EQ(error_of("[defaults]\nmemory = \"20G\"\nmax_memory = \"10G\"\n"),
            "policy.toml:2:10: memory 20G is above max_memory 10G");
  EXPECT_EQ(error_of("[users.alice]\nmax_weight = 2\nweight = 3\n"),
            "policy.toml:3:10: weight 3 is above max_weight 2");
  EXPECT_EQ(error_of("[groups.ml.device.0]\nsm = 60\nmax_sm = 50\n"),
            "policy.toml:2:6: sm 60 is above max_sm 50");
  EXPECT_EQ(error_of("[defaults]\npriority = \"high\"\nmax_priority = \"normal\"\n"),
            "policy.toml:2:12: priority is above max_priority");
}

TEST(PolicyFile, BadDevicesAreRefused) {
  EXPECT_EQ(error_of("[groups.ml]\ndevices = [\"GPU-zz\"]\n"),
            "policy.toml:2:12: device \"GPU-zz\" is not a GPU UUID "
            "(GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)");
  EXPECT_EQ(error_of("[groups.ml]\ndevices = [-1]\n"),
            "policy.toml:2:12: devices: -1 is neither a GPU UUID nor a device index");
  EXPECT_EQ(error_of("[groups.ml]\ndevices = \"0\"\n"),
            "policy.toml:2:11: devices must be a list of GPU UUIDs or device indices");
  EXPECT_EQ(error_of("[groups.ml.device.first]\nmax_sm = 5\n"),
            "policy.toml:1:19: device \"first\" is neither a GPU UUID (GPU-...) nor a device "
            "index");
}

TEST(PolicyFile, ADeviceIndexNeedsTheMachinesGpus) {
  PolicyLookups lookups = test_lookups();
  lookups.gpus = []() -> Result<std::vector<GpuUuid>> { return fail("no NVML here"); };

  const Result<LoadedPolicy> sut =
      parse_policy("[groups.ml]\ndevices = [1]\n", "policy.toml", lookups);

  ASSERT_FALSE(sut.ok());
  EXPECT_EQ(sut.error(),
            "policy.toml:2:12: device 1 is named by its index, but the GPUs cannot be listed (no "
            "NVML here); name it by its UUID");
}

TEST(PolicyFile, UnknownKeysAreWarnedAboutAndTheRestApplies) {
  const Result<LoadedPolicy> sut = parse(R"([defaults]
max_weight = 4
max_wieght = 2
[users.alice.device.0]
colour = "blue"
max_sm = 30
[limits]
)");

  ASSERT_TRUE(sut.ok()) << sut.error();
  EXPECT_EQ(sut->warnings,
            (std::vector<std::string>{
                "policy.toml:3:1: unknown key 'max_wieght' in [defaults] ignored",
                "policy.toml:5:1: unknown key 'colour' in [users.alice] device.0 ignored",
                "policy.toml:7:2: unknown key 'limits' ignored"}));
  EXPECT_EQ(sut->policy->defaults.all_devices.max_weight, 4u);
  EXPECT_EQ(sut->policy->users.at(kAlice).device.at(uuid_of(kGpu0Text)).max_sm, 30u);
}

TEST(PolicyFile, UnknownUsersGroupsAndDevicesAreWarningsNotErrors) {
  const Result<LoadedPolicy> sut = parse(R"([users.carol]
max_sm = 10
[users.4242]
max_sm = 10
[groups.admins]
max_sm = 10
[groups.ml]
devices = [7]
max_sm = 20
)");

  ASSERT_TRUE(sut.ok()) << sut.error();
  EXPECT_EQ(sut->warnings,
            (std::vector<std::string>{
                "policy.toml:1:8: unknown user 'carol'; its entry applies to nobody",
                "policy.toml:3:8: no user has uid 4242",
                "policy.toml:5:9: unknown group 'admins'; its entry applies to nobody",
                "policy.toml:8:12: device 7: the machine has 2 GPUs; this names none of them"}));
  EXPECT_EQ(sut->policy->users.size(), 1u);  // uid 4242 is kept: it may come
  EXPECT_EQ(sut->policy->groups.at(kMl).all_devices.max_sm, 20u);
}

// Found by fuzz/policy_file_fuzzer: messages quoted the file's text as it
// was, so a newline split the one line and an escape sequence reached the
// administrator's terminal.
TEST(PolicyFile, WhatAMessageQuotesOfTheFileIsOneLine) {
  EXPECT_EQ(error_of("[defaults]\nmemory = i\nsm = 5\n"),
            "policy.toml:2:11: Error while parsing floating-point: expected 'inf', saw 'i?'");
  EXPECT_EQ(error_of(R"([defaults]
memory = "\u001b[31m")"),
            "policy.toml:2:10: memory \"?[31m\": not a size (examples: 10G, 512M, 50%)");

  const Result<LoadedPolicy> sut = parse(R"([users."carol\nalice"]
max_sm = 10
)");
  ASSERT_TRUE(sut.ok()) << sut.error();
  EXPECT_EQ(sut->warnings,
            (std::vector<std::string>{
                "policy.toml:1:8: unknown user 'carol?alice'; its entry applies to nobody"}));
}

TEST(PolicyFile, TheSameUserTwiceIsRefused) {
  EXPECT_EQ(error_of("[users.alice]\nmax_sm = 10\n[users.1000]\nmax_sm = 20\n"),
            "policy.toml:1:8: [users.alice] and [users.1000] both name uid 1000");
}

TEST(PolicyFile, AFileThatCannotBeReadIsOneLine) {
  const Result<LoadedPolicy> sut = load_policy_file("/nonexistent/policy.toml", test_lookups());

  ASSERT_FALSE(sut.ok());
  EXPECT_EQ(sut.error(),
            "cannot read the policy file /nonexistent/policy.toml: No such file or directory");
}

TEST(PolicyFile, OnlyARegularFileIsRead) {
  const Result<LoadedPolicy> sut = load_policy_file("/tmp", test_lookups());

  ASSERT_FALSE(sut.ok());
  EXPECT_EQ(sut.error(), "the policy file /tmp is not a regular file");
}

TEST(PolicyFile, TheDefaultPathOfSystemModeMayBeAbsent) {
  const Result<LoadedPolicy> optional =
      load_server_policy("/nonexistent/policy.toml", true, test_lookups());
  const Result<LoadedPolicy> named =
      load_server_policy("/nonexistent/policy.toml", false, test_lookups());
  const Result<LoadedPolicy> none = load_server_policy("", false, test_lookups());

  ASSERT_TRUE(optional.ok());
  EXPECT_EQ(optional->policy, nullptr);
  EXPECT_FALSE(named.ok());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->policy, nullptr);
}

TEST(PolicyFile, TheShippedPolicyLimitsNothing) {
  const Result<LoadedPolicy> sut = load_policy_file(GPULIMIT_SHIPPED_POLICY, test_lookups());

  ASSERT_TRUE(sut.ok()) << sut.error();
  EXPECT_TRUE(sut->warnings.empty());
  EXPECT_TRUE(sut->policy->users.empty());
  EXPECT_TRUE(sut->policy->groups.empty());
  EXPECT_FALSE(sut->policy->defaults.all_devices.max_memory);
}

// ---------------------------------------------------------------------------
// Precedence

TEST(PolicyPrecedence, UserBeforeGroupsBeforeDefaultsSettingBySetting) {
  const auto sut = parse_good(R"(
[defaults]
max_sm = 50
max_weight = 2
max_priority = "low"
[groups.ml]
max_sm = 70
max_weight = 4
[users.alice]
max_sm = 90
)");

  const EffectiveLimits alice = sut->limits_for(alice_in({kUsers, kMl}), nullptr, 0);
  const EffectiveLimits bob = sut->limits_for(PeerIdentity{kBob, {kUsers}}, nullptr, 0);

  EXPECT_EQ(alice.max_sm, 90u);                             // her own entry
  EXPECT_EQ(alice.max_weight, 4u);                          // her group's
  EXPECT_EQ(alice.max_priority, protocol::Priority::kLow);  // the defaults'
  EXPECT_EQ(bob.max_sm, 50u);
  EXPECT_EQ(bob.max_weight, 2u);
}

TEST(PolicyPrecedence, OfSeveralGroupsTheMostRestrictiveWins) {
  const auto sut = parse_good(R"(
[groups.ml]
max_memory = "40G"
max_sm = 30
max_priority = "high"
devices = [0, 1]
unmanaged = "warn"
[groups.students]
max_memory = "10G"
max_sm = 60
max_priority = "normal"
devices = [1]
unmanaged = "kill"
)");
  const PeerIdentity both = alice_in({kUsers, kMl, kStudents});

  const EffectiveLimits limits = sut->limits_for(both, nullptr, 0);

  EXPECT_EQ(limits.max_memory, 10 * kGiB);
  EXPECT_EQ(limits.max_sm, 30u);
  EXPECT_EQ(limits.max_priority, protocol::Priority::kNormal);
  EXPECT_EQ(sut->allowed_devices(both), std::vector<GpuUuid>{uuid_of(kGpu1Text)});
  EXPECT_EQ(sut->unmanaged_action(both), UnmanagedAction::kKill);
  EXPECT_EQ(sut->unmanaged_action(alice_in({kMl})), UnmanagedAction::kWarn);
}

TEST(PolicyPrecedence, ADevicesOwnSectionComesBeforeTheEntrysOther) {
  const auto sut = parse_good(R"(
[defaults]
max_memory = "20G"
[defaults.device.1]
max_memory = "5G"
)");
  const GpuUuid gpu0 = uuid_of(kGpu0Text);
  const GpuUuid gpu1 = uuid_of(kGpu1Text);

  EXPECT_EQ(sut->limits_for(alice_in({}), &gpu0, 0).max_memory, 20 * kGiB);
  EXPECT_EQ(sut->limits_for(alice_in({}), &gpu1, 0).max_memory, 5 * kGiB);
}

TEST(PolicyPrecedence, ADefaultAboveTheMaximumThatAppliesIsLoweredToIt) {
  const auto sut = parse_good(R"(
[defaults]
memory = "16G"
sm = 80
[users.alice]
max_memory = "4G"
max_sm = 25
)");

  const EffectiveLimits limits = sut->limits_for(alice_in({}), nullptr, 0);

  EXPECT_EQ(limits.memory, 4 * kGiB);
  EXPECT_EQ(limits.sm, 25u);
}

TEST(PolicyPrecedence, APercentageIsOfTheDevicesSizeAndUnsetWhenItIsUnknown) {
  const auto sut = parse_good("[defaults]\nmax_memory = \"25%\"\n");
  const GpuUuid gpu0 = uuid_of(kGpu0Text);

  EXPECT_EQ(sut->limits_for(alice_in({}), &gpu0, 80 * kGiB).max_memory, 20 * kGiB);
  EXPECT_FALSE(sut->limits_for(alice_in({}), &gpu0, 0).max_memory);
}

TEST(PolicyPrecedence, TheUsersOwnDevicesOverrideHerGroups) {
  const auto sut = parse_good(R"(
[groups.students]
devices = [1]
[users.alice]
devices = [0, 1]
)");

  EXPECT_TRUE(sut->may_use(alice_in({kStudents}), uuid_of(kGpu0Text)));
  EXPECT_FALSE(sut->may_use(PeerIdentity{kBob, {kStudents}}, uuid_of(kGpu0Text)));
  EXPECT_TRUE(sut->may_use(PeerIdentity{kBob, {kUsers}}, uuid_of(kGpu0Text)));
}

TEST(PolicyPrecedence, TheUnmanagedActionOfAUserHerGroupsOrTheDefaults) {
  const auto sut = parse_good(R"(
[defaults]
unmanaged = "warn"
[groups.ml]
unmanaged = "kill"
[users.alice]
unmanaged = "allow"
)");

  EXPECT_EQ(sut->unmanaged_action(alice_in({kMl})), UnmanagedAction::kAllow);
  EXPECT_EQ(sut->unmanaged_action(PeerIdentity{kBob, {kMl}}), UnmanagedAction::kKill);
  EXPECT_EQ(sut->unmanaged_action(PeerIdentity{kBob, {kUsers}}), UnmanagedAction::kWarn);
  // By uid and gid, as a process watcher sees a process: root's own entry.
  EXPECT_EQ(parse_good("[users.0]\nunmanaged = \"kill\"\n")->unmanaged_action(0, 0),
            UnmanagedAction::kKill);
}

TEST(PolicyPrecedence, TheOrphanRuleOfAUserHerGroupsOrTheDefaultsSettingBySetting) {
  const auto sut = parse_good(R"(
[defaults]
orphan_grace = 300
[groups.ml]
orphans = "kill"
orphan_grace = 120
[groups.students]
orphans = "warn"
orphan_grace = 30
[users.alice]
orphans = "warn"
)");
  const OrphanRule otherwise{OrphanAction::kWarn, 60};

  // Her own action, her groups' shortest grace.
  EXPECT_EQ(sut->orphan_rule(alice_in({kMl, kStudents}), otherwise),
            (OrphanRule{OrphanAction::kWarn, 30}));
  // Kill over warn, whichever group comes first.
  EXPECT_EQ(sut->orphan_rule(PeerIdentity{kBob, {kStudents, kMl}}, otherwise),
            (OrphanRule{OrphanAction::kKill, 30}));
  // The defaults' grace, the server's action.
  EXPECT_EQ(sut->orphan_rule(PeerIdentity{kBob, {kUsers}}, otherwise),
            (OrphanRule{OrphanAction::kWarn, 300}));
  EXPECT_EQ(
      parse_good("")->orphan_rule(PeerIdentity{kBob, {kUsers}}, OrphanRule{OrphanAction::kKill, 5}),
      (OrphanRule{OrphanAction::kKill, 5}));
}

TEST(PolicyFile, ImpossibleOrphanSettingsAreRefusedWithWhereAndWhy) {
  EXPECT_EQ(error_of("[defaults]\norphans = \"reap\"\n"),
            "policy.toml:2:11: orphans \"reap\": not \"warn\" or \"kill\"");
  EXPECT_EQ(error_of("[defaults]\norphan_grace = -1\n"),
            "policy.toml:2:16: orphan_grace -1: not a number of seconds from 0 to 604800");
  EXPECT_EQ(error_of("[defaults]\norphan_grace = \"60s\"\n"),
            "policy.toml:2:16: orphan_grace \"60s\": not a number of seconds from 0 to 604800");
  EXPECT_EQ(error_of("[defaults]\norphan_grace = 604801\n"),
            "policy.toml:2:16: orphan_grace 604801: not a number of seconds from 0 to 604800");
}

// ---------------------------------------------------------------------------
// Clamping

const ComputeShare kNothingAsked{};

TEST(PolicyClamp, WithoutAPolicyEverythingIsGrantedAsAsked) {
  const ComputeShare asked{90, 7, protocol::Priority::kHigh};

  const Result<Grant> sut =
      clamp_to_policy(nullptr, alice_in({}), asked, {{uuid_of(kGpu0Text), 3 * kGiB, 0}});

  ASSERT_TRUE(sut.ok());
  EXPECT_EQ(sut->share, asked);
  EXPECT_EQ(sut->memory_cap, std::vector<uint64_t>{3 * kGiB});
  EXPECT_EQ(sut->notice, "");
}

TEST(PolicyClamp, AJobThatAsksForNothingGetsTheDefaults) {
  const auto policy = parse_good(R"(
[defaults]
memory = "8G"
sm = 40
weight = 2
priority = "low"
)");

  const Result<Grant> sut = clamp_to_policy(policy.get(), alice_in({}), kNothingAsked,
                                            {{uuid_of(kGpu0Text), 0, 80 * kGiB}});

  ASSERT_TRUE(sut.ok());
  EXPECT_EQ(sut->share, (ComputeShare{40, 2, protocol::Priority::kLow}));
  EXPECT_EQ(sut->memory_cap, std::vector<uint64_t>{8 * kGiB});
  EXPECT_EQ(sut->notice, "");
}

TEST(PolicyClamp, AMaximumBindsAJobThatAsksForNothingAndHasNoDefault) {
  const auto policy = parse_good("[defaults]\nmax_memory = \"12G\"\nmax_sm = 50\n");

  const Result<Grant> sut = clamp_to_policy(policy.get(), alice_in({}), kNothingAsked,
                                            {{uuid_of(kGpu0Text), 0, 80 * kGiB}});

  ASSERT_TRUE(sut.ok());
  EXPECT_EQ(sut->share.sm_percent, 50u);
  EXPECT_EQ(sut->memory_cap, std::vector<uint64_t>{12 * kGiB});
}

TEST(PolicyClamp, RequestsAboveTheMaximaAreLoweredAndTheUserToldInOneLine) {
  const auto policy = parse_good(R"(
[defaults]
max_memory = "20G"
max_sm = 50
max_weight = 4
max_priority = "normal"
)");
  const ComputeShare asked{80, 8, protocol::Priority::kHigh};

  const Result<Grant> sut = clamp_to_policy(
      policy.get(), alice_in({}), asked,
      {{uuid_of(kGpu0Text), 40 * kGiB, 80 * kGiB}, {uuid_of(kGpu1Text), 40 * kGiB, 80 * kGiB}});

  ASSERT_TRUE(sut.ok());
  EXPECT_EQ(sut->share, (ComputeShare{50, 4, protocol::Priority::kNormal}));
  EXPECT_EQ(sut->memory_cap, (std::vector<uint64_t>{20 * kGiB, 20 * kGiB}));
  EXPECT_EQ(sut->notice,
            "the policy lowers --sm 80 to 50, --weight 8 to 4, --priority high to normal, --mem "
            "40G to 20G");
}

TEST(PolicyClamp, MemoryLoweredDifferentlyPerDeviceNamesTheDevices) {
  const auto policy = parse_good(R"(
[defaults]
max_memory = "20G"
[defaults.device.1]
max_memory = "10G"
)");

  const Result<Grant> sut = clamp_to_policy(
      policy.get(), alice_in({}), kNothingAsked,
      {{uuid_of(kGpu0Text), 30 * kGiB, 80 * kGiB}, {uuid_of(kGpu1Text), 30 * kGiB, 80 * kGiB}});

  ASSERT_TRUE(sut.ok());
  EXPECT_EQ(sut->memory_cap, (std::vector<uint64_t>{20 * kGiB, 10 * kGiB}));
  EXPECT_EQ(sut->notice, std::string("the policy lowers --mem 30G to 20G on ") + kGpu0Text +
                             ", --mem 30G to 10G on " + kGpu1Text);
}

TEST(PolicyClamp, RequestsWithinTheMaximaAreGrantedAsAsked) {
  const auto policy = parse_good(R"(
[defaults]
memory = "8G"
max_memory = "20G"
sm = 10
max_sm = 50
weight = 2
max_weight = 4
)");
  const ComputeShare asked{30, 3, protocol::Priority::kNormal};

  const Result<Grant> sut = clamp_to_policy(policy.get(), alice_in({}), asked,
                                            {{uuid_of(kGpu0Text), 16 * kGiB, 80 * kGiB}});

  ASSERT_TRUE(sut.ok());
  EXPECT_EQ(sut->share, asked);
  EXPECT_EQ(sut->memory_cap, std::vector<uint64_t>{16 * kGiB});
  EXPECT_EQ(sut->notice, "");
}

TEST(PolicyClamp, ACapOfTheJobsOwnBelowTheDefaultStays) {
  const auto policy = parse_good("[defaults]\nmemory = \"8G\"\n");

  const Result<Grant> sut = clamp_to_policy(policy.get(), alice_in({}), kNothingAsked,
                                            {{uuid_of(kGpu0Text), 2 * kGiB, 80 * kGiB}});

  ASSERT_TRUE(sut.ok());
  EXPECT_EQ(sut->memory_cap, std::vector<uint64_t>{2 * kGiB});
}

TEST(PolicyClamp, ADeviceTheUserMayNotUseIsRefusedNamingIt) {
  const auto policy = parse_good("[groups.students]\ndevices = [1]\n");

  const Result<Grant> sut =
      clamp_to_policy(policy.get(), alice_in({kStudents}), kNothingAsked,
                      {{uuid_of(kGpu0Text), 0, 80 * kGiB}, {uuid_of(kGpu1Text), 0, 80 * kGiB}});

  ASSERT_FALSE(sut.ok());
  EXPECT_EQ(sut.error(), std::string("the policy (policy.toml) lets uid 1000 use ") + kGpu1Text +
                             ", not " + kGpu0Text +
                             "; set CUDA_VISIBLE_DEVICES to the devices allowed");
}

TEST(PolicyClamp, TheComputeShareIsTheStrictestOfTheDevicesTheTenantSees) {
  const auto policy = parse_good(R"(
[defaults]
max_sm = 80
[defaults.device.1]
max_sm = 20
)");
  const ComputeShare asked{60, 1, protocol::Priority::kNormal};

  const ComputeShare on_gpu0 = clamp_share(policy.get(), alice_in({}), asked, {uuid_of(kGpu0Text)});
  const ComputeShare on_both =
      clamp_share(policy.get(), alice_in({}), asked, {uuid_of(kGpu0Text), uuid_of(kGpu1Text)});

  EXPECT_EQ(on_gpu0.sm_percent, 60u);
  EXPECT_EQ(on_both.sm_percent, 20u);
}

// ---------------------------------------------------------------------------
// Which file a server reads

DaemonOptions daemon_options(std::vector<const char*> args) {
  args.insert(args.begin(), "gpulimitd");
  const char* environment[] = {nullptr};
  auto parsed = parse_command_line(static_cast<int>(args.size()), args.data(),
                                   const_cast<char* const*>(environment), 1234);
  EXPECT_TRUE(std::holds_alternative<DaemonOptions>(parsed));
  return std::holds_alternative<DaemonOptions>(parsed) ? std::get<DaemonOptions>(parsed)
                                                       : DaemonOptions{};
}

TEST(PolicyOption, SystemModeReadsTheDefaultFileIfItExists) {
  const ServerConfig sut = daemon_options({"--system"}).server;

  EXPECT_EQ(sut.policy_path, "/etc/gpulimit/policy.toml");
  EXPECT_TRUE(sut.policy_optional);
}

TEST(PolicyOption, PerUserModeReadsNoneUnlessTold) {
  const ServerConfig none = daemon_options({}).server;
  const ServerConfig told = daemon_options({"--policy", "/srv/policy.toml"}).server;

  EXPECT_EQ(none.policy_path, "");
  EXPECT_EQ(told.policy_path, "/srv/policy.toml");
  EXPECT_FALSE(told.policy_optional);
}

TEST(PolicyOption, ARelativePathIsMadeAbsoluteForReloads) {
  const ServerConfig sut = daemon_options({"--system", "--policy", "policy.toml"}).server;

  EXPECT_EQ(sut.policy_path, std::filesystem::current_path().string() + "/policy.toml");
  EXPECT_FALSE(sut.policy_optional);
}

TEST(PolicyIdentity, APeersGroupsAreItsGidAndThoseOfItsUser) {
  const PeerIdentity sut = identify(0, 4242);

  ASSERT_FALSE(sut.groups.empty());
  EXPECT_EQ(sut.groups.front(), 4242u);
  // root's own primary group comes from getgrouplist.
  EXPECT_NE(std::find(sut.groups.begin(), sut.groups.end(), gid_t{0}), sut.groups.end());
}

// ---------------------------------------------------------------------------
// Fair share

TEST(PolicyShares, AGroupsAndAUsersShareAreTheirOwnElseTheDefaultElseOne) {
  const auto policy =
      parse_good("[defaults]\nshare = 2\n[groups.ml]\nshare = 30\n[users.alice]\nshare = 5\n");

  const ShareBranch alice_in_ml = share_branch(policy.get(), kAlice, kMl);
  EXPECT_EQ(alice_in_ml, (ShareBranch{kMl, kAlice, 30, 5}));
  const ShareBranch bob_in_students = share_branch(policy.get(), kBob, kStudents);
  EXPECT_EQ(bob_in_students, (ShareBranch{kStudents, kBob, 2, 2})) << "neither entry sets one";
  EXPECT_EQ(share_branch(nullptr, kBob, kMl), (ShareBranch{kMl, kBob, 1, 1})) << "no policy";
  EXPECT_EQ(share_branch(parse_good("").get(), kBob, kMl), (ShareBranch{kMl, kBob, 1, 1}));
}

TEST(PolicyShares, TheGroupIsTheOneTheJobRunsAsNotEveryGroupOfTheUser) {
  const auto policy = parse_good("[groups.ml]\nshare = 30\n[groups.students]\nshare = 1\n");

  EXPECT_EQ(share_branch(policy.get(), kAlice, kMl).group_share, 30u);
  EXPECT_EQ(share_branch(policy.get(), kAlice, kStudents).group_share, 1u);
}

TEST(PolicyShares, AShareOutOfRangeIsRefused) {
  EXPECT_EQ(error_of("[groups.ml]\nshare = 0\n"),
            "policy.toml:2:9: share 0: not a whole number from 1 to 1000");
  EXPECT_EQ(error_of("[users.alice]\nshare = 1001\n"),
            "policy.toml:2:9: share 1001: not a whole number from 1 to 1000");
  EXPECT_EQ(error_of("[groups.ml]\nshare = \"lots\"\n"),
            "policy.toml:2:9: share \"lots\": not a whole number from 1 to 1000");
}

TEST(PolicyShares, TheUsageHistorysHalfLifeIsInSecondsAndOffByDefault) {
  EXPECT_EQ(parse_good("").get()->usage_half_life_s, 0u);
  EXPECT_EQ(parse_good("[fair_share]\nhalf_life = 604800\n").get()->usage_half_life_s, 604800u);
  EXPECT_EQ(error_of("[fair_share]\nhalf_life = -1\n"),
            "policy.toml:2:13: half_life -1: not a number of seconds from 0 (no history) to "
            "31536000");
  EXPECT_EQ(error_of("[fair_share]\nhalf_life = \"7d\"\n"),
            "policy.toml:2:13: half_life \"7d\": not a number of seconds from 0 (no history) to "
            "31536000");
}

// ---------------------------------------------------------------------------
// Memory totals

TEST(PolicyTotals, AGroupsOrAUsersTotalIsItsDeviceSectionsElseItsEntrys) {
  const auto policy = parse_good(
      "[groups.ml]\nmemory_total = \"40G\"\n[groups.ml.device.1]\nmemory_total = \"20G\"\n"
      "[users.alice]\nmemory_total = \"512M\"\n");

  EXPECT_EQ(policy->group_memory_total(kMl, uuid_of(kGpu0Text)), 40 * kGiB);
  EXPECT_EQ(policy->group_memory_total(kMl, uuid_of(kGpu1Text)), 20 * kGiB);
  EXPECT_EQ(policy->user_memory_total(kAlice, uuid_of(kGpu0Text)), kGiB / 2);
  EXPECT_EQ(policy->group_memory_total(kStudents, uuid_of(kGpu0Text)), std::nullopt);
  EXPECT_EQ(policy->user_memory_total(kBob, uuid_of(kGpu1Text)), std::nullopt);
  EXPECT_TRUE(policy->has_memory_totals());
  EXPECT_FALSE(parse_good("[groups.ml]\nmax_memory = \"1G\"\n")->has_memory_totals());
}

TEST(PolicyTotals, ATotalOfAllDevicesIsAnEntrysOwnAndNoDeviceSectionsSetting) {
  const auto policy = parse_good("[groups.ml]\nmemory_total_all = \"100G\"\n");
  EXPECT_EQ(policy->group_memory_total_all(kMl), uint64_t{100} << 30);
  EXPECT_EQ(policy->user_memory_total_all(kAlice), std::nullopt);
  EXPECT_EQ(policy->group_memory_total(kMl, uuid_of(kGpu0Text)), std::nullopt);
  EXPECT_TRUE(policy->has_memory_totals());
  const Result<LoadedPolicy> in_a_section = parse_policy(
      "[groups.ml.device.0]\nmemory_total_all = \"1G\"\n", "policy.toml", test_lookups());
  ASSERT_TRUE(in_a_section.ok());
  ASSERT_EQ(in_a_section->warnings.size(), 1u);
  EXPECT_NE(in_a_section->warnings[0].find("unknown key 'memory_total_all'"), std::string::npos)
      << in_a_section->warnings[0];
}

TEST(PolicyTotals, ATotalIsNotAPeersSettingAndBindsNobodysOwnCap) {
  const auto policy = parse_good("[users.alice]\nmemory_total = \"1G\"\n");
  const GpuUuid gpu = uuid_of(kGpu0Text);

  const EffectiveLimits sut =
      policy->limits_for(PeerIdentity{kAlice, {kMl}}, &gpu, uint64_t{80} << 30);
  EXPECT_EQ(sut.memory, std::nullopt);
  EXPECT_EQ(sut.max_memory, std::nullopt);
}

TEST(PolicyTotals, APercentageOrATotalInTheDefaultsIsRefused) {
  EXPECT_EQ(error_of("[groups.ml]\nmemory_total = \"50%\"\n"),
            "policy.toml:2:16: memory_total \"50%\": a size such as \"40G\", not a percentage");
  EXPECT_EQ(error_of("[defaults]\nmemory_total = \"1G\"\n"),
            "policy.toml:1:1: memory_total and memory_total_all belong in [groups.NAME] or "
            "[users.NAME], not [defaults]");
  EXPECT_EQ(error_of("[defaults]\nmemory_total_all = \"1G\"\n"),
            "policy.toml:1:1: memory_total and memory_total_all belong in [groups.NAME] or "
            "[users.NAME], not [defaults]");
  EXPECT_EQ(error_of("[users.alice]\nmemory_total = \"lots\"\n").substr(0, 37),
            "policy.toml:2:16: memory_total \"lots\"");
}

TEST(PolicyUuid, ReadsEitherCaseAndRefusesAnythingElse) {
  GpuUuid sut{};

  EXPECT_TRUE(parse_gpu_uuid("GPU-AbCdEf01-2345-6789-aBcD-ef0123456789", sut));
  EXPECT_EQ(sut[0], 0xab);
  EXPECT_EQ(sut[15], 0x89);
  EXPECT_FALSE(parse_gpu_uuid("GPU-abcdef01-2345-6789-abcd-ef012345678", sut));
  EXPECT_FALSE(parse_gpu_uuid("MIG-abcdef01-2345-6789-abcd-ef0123456789", sut));
  EXPECT_FALSE(parse_gpu_uuid("GPU-abcdef01+2345-6789-abcd-ef0123456789", sut));
}

}  // namespace
}  // namespace gpulimit::server
