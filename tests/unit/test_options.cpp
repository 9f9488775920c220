// The option table's grammar, precedence and HAMi aliases, through the
// functions the library (limits_from_environment) and the CLI
// (limits_from_command_line, limits_to_environment) call.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpulimit/options/environment.h"
#include "gpulimit/options/values.h"

namespace gpulimit::options {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

// What an environment without gpulimit's variables gives.
const Limits kNoLimits;

const std::string kSizeExamples = " (examples: 10G, 512M, 50%)";
const std::string kListExample = " (example: 0=10G,1=20%)";
const std::string kNotAnSmPercent = "not a percentage from 1 to 100 (examples: 30, 30%)";
const std::string kNotAWeight = "not a whole number from 1 to 1000";
const std::string kNotAPriority = "not a priority (high, normal or low)";

Amount bytes(uint64_t value) {
  return Amount{Amount::Kind::kBytes, value};
}

Amount percent(uint64_t value) {
  return Amount{Amount::Kind::kPercent, value};
}

// A NULL-terminated NAME=value block, as environ is.
class EnvironmentBlock {
 public:
  explicit EnvironmentBlock(std::vector<std::string> assignments) : text_(std::move(assignments)) {
    for (std::string& assignment : text_)
      pointers_.push_back(assignment.data());
    pointers_.push_back(nullptr);
  }
  char* const* get() const { return pointers_.data(); }

 private:
  std::vector<std::string> text_;
  std::vector<char*> pointers_;
};

Limits read_environment(std::initializer_list<std::string> assignments) {
  const EnvironmentBlock block(assignments);
  Limits limits;
  std::string error;
  EXPECT_TRUE(limits_from_environment(block.get(), limits, error)) << error;
  return limits;
}

std::string environment_error(std::initializer_list<std::string> assignments) {
  const EnvironmentBlock block(assignments);
  Limits limits;
  std::string error;
  EXPECT_FALSE(limits_from_environment(block.get(), limits, error));
  return error;
}

std::string amount_error(std::string_view text) {
  Amount amount;
  std::string reason;
  EXPECT_FALSE(parse_amount(text, amount, reason)) << '"' << text << '"';
  return reason;
}

std::string list_error(std::string_view text) {
  std::map<unsigned, Amount> amounts;
  std::string reason;
  EXPECT_FALSE(parse_device_amounts(text, amounts, reason)) << '"' << text << '"';
  return reason;
}

TEST(OptionTable, NamesAreUniqueAndSpelledAlike) {
  std::set<std::string_view> names, variables, flags;
  for (const OptionSpec& spec : kOptionTable) {
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name;
    EXPECT_TRUE(variables.insert(spec.variable).second) << spec.variable;
    EXPECT_TRUE(spec.variable.starts_with("GPULIMIT_")) << spec.variable;
    EXPECT_FALSE(spec.help.empty()) << spec.name;
    if (spec.flag.empty()) continue;
    EXPECT_TRUE(flags.insert(spec.flag).second) << spec.flag;
    EXPECT_EQ(spec.flag, "--" + std::string(spec.name));
  }
}

TEST(Amount, SizesAsParseByteSizeReadsThem) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"1", 1},
      {"4096", 4096},
      {"1K", 1024},
      {"512m", 512 * kMiB},
      {"10G", 10 * kGiB},
      {"10g", 10 * kGiB},
      {"2T", 2 * kGiB << 10},
      {"2048m", 2 * kGiB},
      {"1048576k", kGiB},
      {"1073741824", kGiB},
      {"18446744073709551615", UINT64_MAX},
  };
  for (const auto& [text, expected] : cases) {
    Amount amount;
    std::string reason;
    ASSERT_TRUE(parse_amount(text, amount, reason)) << text << ": " << reason;
    EXPECT_EQ(amount, bytes(expected)) << text;
  }
}

TEST(Amount, PercentagesFromOneToHundred) {
  for (const uint64_t value : {1, 50, 99, 100}) {
    Amount amount;
    std::string reason;
    ASSERT_TRUE(parse_amount(std::to_string(value) + "%", amount, reason)) << reason;
    EXPECT_EQ(amount, percent(value));
  }
}

TEST(Amount, RefusesWhatIsNotASize) {
  for (const char* text : {"", "10Q", "G", "-1", "-1G", "+1G", "1.5G", "10GB", "10 G", " 10G",
                           "10G ", "0x10", "1e9", "G10", "ten", "10KiB", "1_000"}) {
    EXPECT_EQ(amount_error(text), "not a size" + kSizeExamples) << '"' << text << '"';
  }
}

TEST(Amount, RefusesZero) {
  for (const char* text : {"0", "0K", "0G", "000"})
    EXPECT_EQ(amount_error(text), "zero is not a cap" + kSizeExamples) << text;
}

TEST(Amount, RefusesPercentagesOutsideOneToHundred) {
  for (const char* text : {"0%", "101%", "1000%", "50.5%", "-5%", "+5%", "%", "5 %", "5%%", "x%",
                           "99999999999999999999999%"}) {
    EXPECT_EQ(amount_error(text), "not a percentage from 1% to 100%") << '"' << text << '"';
  }
}

TEST(Amount, RefusesWhatDoesNotFitIn64Bits) {
  for (const char* text : {"18446744073709551616", "16777216T", "99999999999999999999G"})
    EXPECT_EQ(amount_error(text), "too large for 64 bits") << text;
}

TEST(Amount, ResolvesAgainstTheDevice) {
  EXPECT_EQ(bytes(10 * kGiB).resolve(16 * kGiB), 10 * kGiB);
  EXPECT_EQ(bytes(32 * kGiB).resolve(16 * kGiB), 32 * kGiB);
  EXPECT_EQ(percent(50).resolve(16 * kGiB), 8 * kGiB);
  EXPECT_EQ(percent(100).resolve(16 * kGiB), 16 * kGiB);
  EXPECT_EQ(percent(33).resolve(100), 33u);
  EXPECT_EQ(percent(1).resolve(99), 0u);
  EXPECT_EQ(percent(100).resolve(UINT64_MAX), UINT64_MAX);
  EXPECT_EQ(percent(99).resolve(UINT64_MAX), 18262276632972456098u);  // floor((2^64 - 1) * 0.99)
}

TEST(DeviceIndex, OneSpellingFromZeroTo63) {
  for (const auto& [text, expected] :
       {std::pair{"0", 0u}, std::pair{"7", 7u}, std::pair{"10", 10u}, std::pair{"63", 63u}}) {
    unsigned index = 99;
    EXPECT_TRUE(parse_device_index(text, index)) << text;
    EXPECT_EQ(index, expected);
  }
  for (const char* text : {"", "64", "100", "00", "01", "-0", "-1", "+1", " 1", "1 ", "0x1", "a",
                           "99999999999999999999999"}) {
    unsigned index = 0;
    EXPECT_FALSE(parse_device_index(text, index)) << '"' << text << '"';
  }
}

TEST(DeviceAmounts, ListsOfIndexAndAmount) {
  std::map<unsigned, Amount> amounts;
  std::string reason;
  ASSERT_TRUE(parse_device_amounts("1=20%,0=10G,63=512M", amounts, reason)) << reason;
  const std::map<unsigned, Amount> expected = {
      {0, bytes(10 * kGiB)}, {1, percent(20)}, {63, bytes(512 * kMiB)}};
  EXPECT_EQ(amounts, expected);
}

TEST(DeviceAmounts, RefusesMalformedLists) {
  EXPECT_EQ(list_error(""), "an empty list" + kListExample);
  for (const char* text : {",", "0=1G,", ",0=1G", "0=1G,,1=1G"})
    EXPECT_EQ(list_error(text), "an empty entry in the list" + kListExample) << text;
  EXPECT_EQ(list_error("0"), "'0' is not DEVICE=SIZE" + kListExample);
  EXPECT_EQ(list_error("10G"), "'10G' is not DEVICE=SIZE" + kListExample);
  EXPECT_EQ(list_error("0=1G,1"), "'1' is not DEVICE=SIZE" + kListExample);
  EXPECT_EQ(list_error("0:1G"), "'0:1G' is not DEVICE=SIZE" + kListExample);
}

TEST(DeviceAmounts, RefusesBadIndices) {
  EXPECT_EQ(list_error("=1G"), "'' is not a device index (0 to 63) or a GPU's UUID (GPU-...)");
  EXPECT_EQ(list_error("64=1G"), "'64' is not a device index (0 to 63) or a GPU's UUID (GPU-...)");
  EXPECT_EQ(list_error("1000000=1G"),
            "'1000000' is not a device index (0 to 63) or a GPU's UUID (GPU-...)");
  EXPECT_EQ(list_error("01=1G"), "'01' is not a device index (0 to 63) or a GPU's UUID (GPU-...)");
  EXPECT_EQ(list_error("-1=1G"), "'-1' is not a device index (0 to 63) or a GPU's UUID (GPU-...)");
  EXPECT_EQ(list_error(" 0=1G"), "' 0' is not a device index (0 to 63) or a GPU's UUID (GPU-...)");
  EXPECT_EQ(list_error("0=1G,gpu1=1G"),
            "'gpu1' is not a device index (0 to 63) or a GPU's UUID (GPU-...)");
}

TEST(DeviceAmounts, RefusesBadAmountsNamingTheDevice) {
  EXPECT_EQ(list_error("0="), "device 0: not a size" + kSizeExamples);
  EXPECT_EQ(list_error("0=1G,3=0"), "device 3: zero is not a cap" + kSizeExamples);
  EXPECT_EQ(list_error("2=101%"), "device 2: not a percentage from 1% to 100%");
  EXPECT_EQ(list_error("0=1G=2G"), "device 0: not a size" + kSizeExamples);
  EXPECT_EQ(list_error("0=1G;1=2G"), "device 0: not a size" + kSizeExamples);
  EXPECT_EQ(list_error("0=1G, 1=2G"),
            "' 1' is not a device index (0 to 63) or a GPU's UUID (GPU-...)");
}

TEST(DeviceAmounts, RefusesADeviceGivenTwice) {
  EXPECT_EQ(list_error("0=1G,0=2G"), "device 0 is given twice");
  EXPECT_EQ(list_error("1=1G,0=5%,1=1G"), "device 1 is given twice");
}

constexpr DeviceUuid kGpuA = {0x4f, 0x1e, 0x00, 0x01, 0xab, 0xcd, 0x12, 0x34,
                              0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x00, 0xff};
constexpr DeviceUuid kGpuB = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                              0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10};
const std::string kGpuAText = "GPU-4f1e0001-abcd-1234-5678-9abcdef000ff";

TEST(DeviceUuid, ReadsWhatNvmlWritesAndWritesItBack) {
  DeviceUuid uuid{};
  ASSERT_TRUE(parse_device_uuid(kGpuAText, uuid));
  EXPECT_EQ(uuid, kGpuA);
  EXPECT_EQ(format_device_uuid(uuid), kGpuAText);
  // Upper case, a MIG device's prefix, dashes elsewhere: the same 16 bytes.
  for (const char* text :
       {"GPU-4F1E0001-ABCD-1234-5678-9ABCDEF000FF", "MIG-4f1e0001-abcd-1234-5678-9abcdef000ff",
        "GPU-4f1e0001abcd123456789abcdef000ff"}) {
    ASSERT_TRUE(parse_device_uuid(text, uuid)) << text;
    EXPECT_EQ(uuid, kGpuA) << text;
  }
  for (const char* text : {"", "GPU-", "gpu-4f1e0001-abcd-1234-5678-9abcdef000ff",
                           "GPU-4f1e0001-abcd-1234-5678-9abcdef000f",    // 31 digits
                           "GPU-4f1e0001-abcd-1234-5678-9abcdef000ff0",  // 33 digits
                           "GPU-4f1e0001-abcd-1234-5678-9abcdef000fg",   // not hex
                           "GPU--4f1e0001-abcd-1234-5678-9abcdef000ff",  // dash first
                           "GPU-4f1e0001-abcd-1234-5678-9abcdef000ff-",  // dash last
                           "4f1e0001-abcd-1234-5678-9abcdef000ff"}) {
    EXPECT_FALSE(parse_device_uuid(text, uuid)) << text;
  }
}

TEST(DeviceAmounts, ListsMayNameDevicesByUuid) {
  MemoryLimits memory;
  std::string reason;
  ASSERT_TRUE(parse_device_amounts("1=20%," + kGpuAText + "=4G", memory, reason)) << reason;
  EXPECT_EQ(memory.by_device, (std::map<unsigned, Amount>{{1, percent(20)}}));
  EXPECT_EQ(memory.by_uuid, (std::map<DeviceUuid, Amount>{{kGpuA, bytes(4 * kGiB)}}));
  EXPECT_FALSE(parse_device_amounts(kGpuAText + "=1G,MIG-4f1e0001abcd123456789abcdef000ff=2G",
                                    memory, reason));
  EXPECT_EQ(reason, "device MIG-4f1e0001abcd123456789abcdef000ff is given twice");
  // Where only indices make sense, a UUID is refused by name.
  EXPECT_EQ(list_error(kGpuAText + "=1G"), "devices are named by index here, not by UUID");
}

TEST(MemoryLimits, AGpusOwnEntryComesBeforeItsOrdinalsAndTheDefault) {
  MemoryLimits memory;
  memory.all = bytes(8 * kGiB);
  memory.by_device = {{0, bytes(2 * kGiB)}};
  memory.by_uuid = {{kGpuA, bytes(kGiB)}};
  EXPECT_EQ(memory.for_gpu(kGpuA, 0), bytes(kGiB));
  EXPECT_EQ(memory.for_gpu(kGpuA, 5), bytes(kGiB));
  EXPECT_EQ(memory.for_gpu(kGpuB, 0), bytes(2 * kGiB));
  EXPECT_EQ(memory.for_gpu(kGpuB, 1), bytes(8 * kGiB));
  EXPECT_EQ(memory.smallest(100 * kGiB), kGiB);
  EXPECT_EQ(MemoryLimits{}.smallest(100 * kGiB), std::nullopt);
}

TEST(MemoryLimits, BeforeBindingAGpuWithoutItsOwnCapGetsTheLeastWhileIndicesRemain) {
  MemoryLimits memory;
  memory.all = bytes(8 * kGiB);
  EXPECT_EQ(memory.cap_before_binding(kGpuB, 100 * kGiB), 8 * kGiB);
  memory.by_uuid = {{kGpuA, percent(50)}};
  EXPECT_EQ(memory.cap_before_binding(kGpuA, 100 * kGiB), 50 * kGiB);
  EXPECT_EQ(memory.cap_before_binding(kGpuB, 100 * kGiB), 8 * kGiB);
  memory.by_device = {{3, bytes(2 * kGiB)}};
  EXPECT_EQ(memory.cap_before_binding(kGpuA, 100 * kGiB), 50 * kGiB);
  EXPECT_EQ(memory.cap_before_binding(kGpuB, 100 * kGiB), 2 * kGiB);
  EXPECT_EQ(MemoryLimits{}.cap_before_binding(kGpuA, 100 * kGiB), std::nullopt);
}

TEST(MemoryLimits, BindingTiesOrdinalsToTheGpusTheyNameHere) {
  MemoryLimits memory;
  memory.all = bytes(8 * kGiB);
  memory.by_device = {{0, bytes(2 * kGiB)}, {1, percent(10)}, {7, bytes(kGiB)}};
  std::string reason;
  ASSERT_TRUE(memory.bind({kGpuB, kGpuA}, reason)) << reason;
  EXPECT_TRUE(memory.by_device.empty());  // ordinal 7 names no GPU here: dropped
  EXPECT_EQ(memory.by_uuid,
            (std::map<DeviceUuid, Amount>{{kGpuB, bytes(2 * kGiB)}, {kGpuA, percent(10)}}));
  // A child that sees only GPU A, as its ordinal 0, keeps GPU A's cap.
  EXPECT_EQ(memory.for_gpu(kGpuA, 0), percent(10));
  EXPECT_EQ(memory.all, bytes(8 * kGiB));
  // Bound twice (a child binds again): nothing changes.
  const MemoryLimits bound = memory;
  ASSERT_TRUE(memory.bind({kGpuA}, reason)) << reason;
  EXPECT_EQ(memory, bound);
}

TEST(MemoryLimits, BindingRefusesAnOrdinalAndAUuidThatDisagree) {
  MemoryLimits memory;
  memory.by_device = {{0, bytes(2 * kGiB)}};
  memory.by_uuid = {{kGpuA, bytes(kGiB)}};
  const MemoryLimits before = memory;
  std::string reason;
  EXPECT_FALSE(memory.bind({kGpuA}, reason));
  EXPECT_EQ(reason, "device 0 is " + kGpuAText + ", which is given another cap");
  EXPECT_EQ(memory, before);
  memory.by_device = {{0, bytes(kGiB)}};  // the same cap twice is no conflict
  EXPECT_TRUE(memory.bind({kGpuA}, reason)) << reason;
}

TEST(TenantId, SafeCharactersUpTo64) {
  std::string reason;
  for (const std::string& text : std::vector<std::string>{
           "a", "train-42", "A.b_c-9", "1000-4242-0123456789abcdef", std::string(64, 'x')})
    EXPECT_TRUE(parse_tenant_id(text, reason)) << text;
  for (const std::string& text : std::vector<std::string>{
           "", std::string(65, 'x'), "a b", "a/b", "a:b", "a=b", "$x", "a\tb", "caf\xc3\xa9"}) {
    EXPECT_FALSE(parse_tenant_id(text, reason)) << text;
    EXPECT_EQ(reason, "not a tenant id (1 to 64 characters of A-Z a-z 0-9 . _ -)");
  }
}

std::string sm_error(std::string_view text) {
  unsigned percent = 0;
  std::string reason;
  EXPECT_FALSE(parse_sm_percent(text, percent, reason)) << '"' << text << '"';
  return reason;
}

TEST(SmPercent, AWholePercentageWithOrWithoutTheSign) {
  const std::pair<const char*, unsigned> cases[] = {
      {"1", 1},     {"30", 30},    {"30%", 30}, {"99", 99},
      {"100", 100}, {"100%", 100}, {"1%", 1},   {"030", 30},
  };
  for (const auto& [text, expected] : cases) {
    unsigned percent = 0;
    std::string reason;
    ASSERT_TRUE(parse_sm_percent(text, percent, reason)) << text << ": " << reason;
    EXPECT_EQ(percent, expected) << text;
  }
}

TEST(SmPercent, RefusesWhatIsNotAPercentage) {
  for (const char* text : {"", "%", "abc", "30%%", "%30", "-5", "+5", "5.5", "5.5%", " 30", "30 ",
                           "30 %", "0x1e", "1e2", "30G", "thirty"})
    EXPECT_EQ(sm_error(text), kNotAnSmPercent) << '"' << text << '"';
}

TEST(SmPercent, RefusesPercentagesAbove100) {
  for (const char* text : {"101", "101%", "1000", "99999999999999999999", "18446744073709551616%"})
    EXPECT_EQ(sm_error(text), kNotAnSmPercent) << text;
}

TEST(SmPercent, RefusesZeroAsMemDoes) {
  for (const char* text : {"0", "0%", "00"})
    EXPECT_EQ(sm_error(text), "zero is not a cap (examples: 30, 30%)") << text;
}

TEST(SmPercent, HamisValueIsTheSameButZeroMeansNoCap) {
  for (const auto& [text, expected] :
       {std::pair{"0", 0u}, std::pair{"50", 50u}, std::pair{"100", 100u}, std::pair{"25%", 25u}}) {
    unsigned percent = 99;
    std::string reason;
    ASSERT_TRUE(parse_hami_sm_limit(text, percent, reason)) << text << ": " << reason;
    EXPECT_EQ(percent, expected) << text;
  }
  for (const char* text : {"", "-1", "101", "fifty", "0.5"}) {
    unsigned percent = 0;
    std::string reason;
    EXPECT_FALSE(parse_hami_sm_limit(text, percent, reason)) << '"' << text << '"';
    EXPECT_EQ(reason, "not a percentage from 0 (no cap) to 100");
  }
}

TEST(Weight, AWholeNumberFromOneToTheMaximum) {
  for (const auto& [text, expected] : {std::pair{"1", 1u}, std::pair{"2", 2u},
                                       std::pair{"999", 999u}, std::pair{"1000", kMaxWeight}}) {
    unsigned weight = 0;
    std::string reason;
    ASSERT_TRUE(parse_weight(text, weight, reason)) << text << ": " << reason;
    EXPECT_EQ(weight, expected) << text;
  }
  for (const char* text : {"", "0", "00", "1001", "18446744073709551617", "-1", "+2", "1.5", "2x",
                           " 2", "2 ", "two", "1e3", "50%"}) {
    unsigned weight = 7;
    std::string reason;
    EXPECT_FALSE(parse_weight(text, weight, reason)) << '"' << text << '"';
    EXPECT_EQ(reason, kNotAWeight) << '"' << text << '"';
    EXPECT_EQ(weight, 7u) << "changed on error";
  }
}

TEST(Priority, ThreeWordsInLowerCase) {
  for (const Priority expected : {Priority::kHigh, Priority::kNormal, Priority::kLow}) {
    Priority priority = Priority::kNormal;
    std::string reason;
    ASSERT_TRUE(parse_priority(priority_name(expected), priority, reason)) << reason;
    EXPECT_EQ(priority, expected);
  }
  EXPECT_EQ(priority_name(Priority::kHigh), "high");
  EXPECT_EQ(priority_name(Priority::kNormal), "normal");
  EXPECT_EQ(priority_name(Priority::kLow), "low");
  for (const char* text :
       {"", "HIGH", "High", "medium", "urgent", " high", "high ", "1", "-1", "hi", "highest"}) {
    Priority priority = Priority::kNormal;
    std::string reason;
    EXPECT_FALSE(parse_priority(text, priority, reason)) << '"' << text << '"';
    EXPECT_EQ(reason, kNotAPriority);
  }
}

TEST(SocketOption, AbsoluteAndShortEnoughForAUnixSocket) {
  std::string reason;
  const std::string longest = "/" + std::string(kMaxSocketPathLength - 1, 's');
  for (const std::string& text :
       std::vector<std::string>{"/run/gpulimit/gpulimitd.sock", "/s", longest})
    EXPECT_TRUE(parse_socket_path(text, reason)) << text << ": " << reason;

  for (const char* text : {"", "gpulimitd.sock", "./gpulimitd.sock", "~/gpulimitd.sock"}) {
    EXPECT_FALSE(parse_socket_path(text, reason)) << '"' << text << '"';
    EXPECT_EQ(reason, "not an absolute path");
  }
  EXPECT_FALSE(parse_socket_path(longest + "s", reason));
  EXPECT_EQ(reason, "longer than 107 bytes, the most a unix socket's path can have");
}

TEST(Environment, NothingSetMeansNoLimits) {
  Limits limits;
  std::string error;
  ASSERT_TRUE(limits_from_environment(nullptr, limits, error));
  EXPECT_EQ(limits, kNoLimits);
  EXPECT_TRUE(limits.memory.empty());
  EXPECT_EQ(limits.ledger_dir, "/dev/shm");
  EXPECT_EQ(limits.compute, ComputeLimits{});
  EXPECT_EQ(limits.compute.sm_percent, 0u);
  EXPECT_EQ(limits.compute.weight, 1u);
  EXPECT_EQ(limits.compute.priority, Priority::kNormal);
  EXPECT_EQ(limits.socket, "");

  EXPECT_EQ(read_environment({"PATH=/bin", "HOME=/root"}), kNoLimits);
}

TEST(Environment, ReadsEveryVariable) {
  const Limits limits =
      read_environment({"GPULIMIT_MEM=10G", "GPULIMIT_DEVICE_MEM=1=20%,3=1536M",
                        "GPULIMIT_TENANT=train-42", "GPULIMIT_LEDGER_DIR=/tmp/ledgers"});
  EXPECT_EQ(limits.memory.all, bytes(10 * kGiB));
  const std::map<unsigned, Amount> by_device = {{1, percent(20)}, {3, bytes(1536 * kMiB)}};
  EXPECT_EQ(limits.memory.by_device, by_device);
  EXPECT_EQ(limits.tenant, "train-42");
  EXPECT_EQ(limits.ledger_dir, "/tmp/ledgers");
}

TEST(Environment, ReadsTheComputeLimitsAndTheSocket) {
  const Limits limits =
      read_environment({"GPULIMIT_SM=30%", "GPULIMIT_WEIGHT=2", "GPULIMIT_PRIORITY=high",
                        "GPULIMIT_SOCKET=/run/user/1000/gpulimit/gpulimitd.sock"});
  EXPECT_EQ(limits.compute, (ComputeLimits{30, 2, Priority::kHigh}));
  EXPECT_EQ(limits.socket, "/run/user/1000/gpulimit/gpulimitd.sock");
  EXPECT_TRUE(limits.memory.empty());

  EXPECT_EQ(read_environment({"GPULIMIT_SM=30"}).compute.sm_percent, 30u);
  EXPECT_EQ(read_environment({"GPULIMIT_PRIORITY=low"}).compute.priority, Priority::kLow);
  EXPECT_EQ(read_environment({"GPULIMIT_WEIGHT=1000"}).compute.weight, 1000u);
}

TEST(Environment, ADeviceEntryOverridesTheCapForEveryDevice) {
  const Limits limits = read_environment({"GPULIMIT_MEM=10G", "GPULIMIT_DEVICE_MEM=1=20%"});
  EXPECT_EQ(limits.memory.for_device(0), bytes(10 * kGiB));
  EXPECT_EQ(limits.memory.for_device(1), percent(20));
  EXPECT_EQ(limits.memory.for_device(63), bytes(10 * kGiB));

  const Limits per_device = read_environment({"GPULIMIT_DEVICE_MEM=1=20%"});
  EXPECT_FALSE(per_device.memory.empty());
  EXPECT_EQ(per_device.memory.for_device(0), std::nullopt);
  EXPECT_EQ(per_device.memory.for_device(1), percent(20));
}

TEST(Environment, ErrorsNameTheVariableAndTheValue) {
  EXPECT_EQ(environment_error({"GPULIMIT_MEM=10Q"}),
            "GPULIMIT_MEM=10Q: not a size (examples: 10G, 512M, 50%)");
  EXPECT_EQ(environment_error({"GPULIMIT_MEM=0"}),
            "GPULIMIT_MEM=0: zero is not a cap (examples: 10G, 512M, 50%)");
  EXPECT_EQ(environment_error({"GPULIMIT_MEM=150%"}),
            "GPULIMIT_MEM=150%: not a percentage from 1% to 100%");
  EXPECT_EQ(environment_error({"GPULIMIT_DEVICE_MEM=0=1G,0=2G"}),
            "GPULIMIT_DEVICE_MEM=0=1G,0=2G: device 0 is given twice");
  EXPECT_EQ(
      environment_error({"GPULIMIT_DEVICE_MEM=64=1G"}),
      "GPULIMIT_DEVICE_MEM=64=1G: '64' is not a device index (0 to 63) or a GPU's UUID (GPU-...)");
  EXPECT_EQ(environment_error({"GPULIMIT_TENANT=my job"}),
            "GPULIMIT_TENANT=my job: not a tenant id (1 to 64 characters of A-Z a-z 0-9 . _ -)");
  EXPECT_EQ(environment_error({"GPULIMIT_LEDGER_DIR=ledgers"}),
            "GPULIMIT_LEDGER_DIR=ledgers: not an absolute path");
  EXPECT_EQ(environment_error({"GPULIMIT_SM=0"}),
            "GPULIMIT_SM=0: zero is not a cap (examples: 30, 30%)");
  EXPECT_EQ(environment_error({"GPULIMIT_SM=150"}), "GPULIMIT_SM=150: " + kNotAnSmPercent);
  EXPECT_EQ(environment_error({"GPULIMIT_SM=half"}), "GPULIMIT_SM=half: " + kNotAnSmPercent);
  EXPECT_EQ(environment_error({"GPULIMIT_WEIGHT=0"}), "GPULIMIT_WEIGHT=0: " + kNotAWeight);
  EXPECT_EQ(environment_error({"GPULIMIT_WEIGHT=1001"}), "GPULIMIT_WEIGHT=1001: " + kNotAWeight);
  EXPECT_EQ(environment_error({"GPULIMIT_WEIGHT=1.5"}), "GPULIMIT_WEIGHT=1.5: " + kNotAWeight);
  EXPECT_EQ(environment_error({"GPULIMIT_PRIORITY=urgent"}),
            "GPULIMIT_PRIORITY=urgent: " + kNotAPriority);
  EXPECT_EQ(environment_error({"GPULIMIT_SOCKET=gpulimitd.sock"}),
            "GPULIMIT_SOCKET=gpulimitd.sock: not an absolute path");
  const std::string too_long = "/" + std::string(kMaxSocketPathLength, 's');
  EXPECT_EQ(environment_error({"GPULIMIT_SOCKET=" + too_long}),
            "GPULIMIT_SOCKET=" + too_long +
                ": longer than 107 bytes, the most a unix socket's path can have");
}

TEST(Environment, LeavesTheLimitsAloneOnError) {
  const EnvironmentBlock block({"GPULIMIT_TENANT=ok", "GPULIMIT_MEM=bad"});
  Limits limits;
  limits.tenant = "before";
  std::string error;
  EXPECT_FALSE(limits_from_environment(block.get(), limits, error));
  EXPECT_EQ(limits.tenant, "before");
  EXPECT_FALSE(limits.memory.all);
}

TEST(Environment, AnEmptyVariableCountsAsUnset) {
  EXPECT_EQ(read_environment({"GPULIMIT_MEM=", "GPULIMIT_DEVICE_MEM=", "GPULIMIT_TENANT=",
                              "GPULIMIT_LEDGER_DIR=", "CUDA_DEVICE_MEMORY_LIMIT=",
                              "CUDA_DEVICE_MEMORY_LIMIT_0=", "GPULIMIT_SM=", "GPULIMIT_WEIGHT=",
                              "GPULIMIT_PRIORITY=", "GPULIMIT_SOCKET=", "CUDA_DEVICE_SM_LIMIT="}),
            kNoLimits);
}

TEST(Environment, TheFirstAssignmentOfANameCountsAsWithGetenv) {
  EXPECT_EQ(read_environment({"GPULIMIT_MEM=1G", "GPULIMIT_MEM=2G"}).memory.all, bytes(kGiB));
  EXPECT_EQ(read_environment({"GPULIMIT_MEM=", "GPULIMIT_MEM=2G"}).memory.all, std::nullopt);
  EXPECT_EQ(read_environment({"GPULIMIT_MEM=1G", "GPULIMIT_MEM=junk"}).memory.all, bytes(kGiB));
}

TEST(Environment, OnlyExactNamesCount) {
  EXPECT_EQ(read_environment({"GPULIMIT_MEMX=1G", "GPULIMIT_ME=1G", "XGPULIMIT_MEM=1G",
                              "GPULIMIT_MEM", "gpulimit_mem=1G", "GPULIMIT_DEVICE_MEMORY=junk"}),
            kNoLimits);
}

TEST(HamiAliases, ReadAsTheGpulimitVariables) {
  EXPECT_EQ(read_environment({"CUDA_DEVICE_MEMORY_LIMIT=2048m"}).memory.all, bytes(2 * kGiB));
  EXPECT_EQ(read_environment({"CUDA_DEVICE_MEMORY_LIMIT=10g"}).memory.all, bytes(10 * kGiB));
  EXPECT_EQ(read_environment({"CUDA_DEVICE_MEMORY_LIMIT=1048576k"}).memory.all, bytes(kGiB));
  EXPECT_EQ(read_environment({"CUDA_DEVICE_MEMORY_LIMIT=1073741824"}).memory.all, bytes(kGiB));

  const Limits limits =
      read_environment({"CUDA_DEVICE_MEMORY_LIMIT_0=1g", "CUDA_DEVICE_MEMORY_LIMIT_1=2048m",
                        "CUDA_DEVICE_MEMORY_LIMIT_12=4096m"});
  const std::map<unsigned, Amount> by_device = {
      {0, bytes(kGiB)}, {1, bytes(2 * kGiB)}, {12, bytes(4 * kGiB)}};
  EXPECT_EQ(limits.memory.by_device, by_device);
  EXPECT_EQ(limits.memory.all, std::nullopt);
}

TEST(HamiAliases, MergeWithTheGpulimitVariablesWhenTheyAgree) {
  const Limits limits = read_environment(
      {"GPULIMIT_MEM=2G", "CUDA_DEVICE_MEMORY_LIMIT=2048m", "GPULIMIT_DEVICE_MEM=0=1G,1=10%",
       "CUDA_DEVICE_MEMORY_LIMIT_0=1024m", "CUDA_DEVICE_MEMORY_LIMIT_2=3g"});
  EXPECT_EQ(limits.memory.all, bytes(2 * kGiB));
  const std::map<unsigned, Amount> by_device = {
      {0, bytes(kGiB)}, {1, percent(10)}, {2, bytes(3 * kGiB)}};
  EXPECT_EQ(limits.memory.by_device, by_device);
}

TEST(HamiAliases, DisagreeingWithTheGpulimitVariableIsAnErrorNamingBoth) {
  EXPECT_EQ(environment_error({"GPULIMIT_MEM=2G", "CUDA_DEVICE_MEMORY_LIMIT=1g"}),
            "GPULIMIT_MEM=2G and CUDA_DEVICE_MEMORY_LIMIT=1g disagree");
  EXPECT_EQ(environment_error({"CUDA_DEVICE_MEMORY_LIMIT=1g", "GPULIMIT_MEM=2G"}),
            "GPULIMIT_MEM=2G and CUDA_DEVICE_MEMORY_LIMIT=1g disagree");
  // Equal only on a device of 16 GiB: a percentage is not a size.
  EXPECT_EQ(environment_error({"GPULIMIT_MEM=50%", "CUDA_DEVICE_MEMORY_LIMIT=8g"}),
            "GPULIMIT_MEM=50% and CUDA_DEVICE_MEMORY_LIMIT=8g disagree");
  EXPECT_EQ(environment_error({"GPULIMIT_DEVICE_MEM=0=1G,1=2G", "CUDA_DEVICE_MEMORY_LIMIT_0=1g",
                               "CUDA_DEVICE_MEMORY_LIMIT_1=1g"}),
            "GPULIMIT_DEVICE_MEM=0=1G,1=2G and CUDA_DEVICE_MEMORY_LIMIT_1=1g disagree on device 1");
}

TEST(HamiAliases, CapForEveryDeviceAndForOneDeviceAreDifferentSettings) {
  const Limits limits = read_environment({"GPULIMIT_MEM=4G", "CUDA_DEVICE_MEMORY_LIMIT_0=1g"});
  EXPECT_EQ(limits.memory.for_device(0), bytes(kGiB));
  EXPECT_EQ(limits.memory.for_device(1), bytes(4 * kGiB));
}

TEST(HamiAliases, ErrorsNameTheAlias) {
  EXPECT_EQ(environment_error({"CUDA_DEVICE_MEMORY_LIMIT=lots"}),
            "CUDA_DEVICE_MEMORY_LIMIT=lots: not a size" + kSizeExamples);
  EXPECT_EQ(environment_error({"CUDA_DEVICE_MEMORY_LIMIT_3=0"}),
            "CUDA_DEVICE_MEMORY_LIMIT_3=0: zero is not a cap" + kSizeExamples);
  EXPECT_EQ(environment_error({"CUDA_DEVICE_MEMORY_LIMIT_64=1g"}),
            "CUDA_DEVICE_MEMORY_LIMIT_64=1g: '64' is not a device index (0 to 63)");
  EXPECT_EQ(environment_error({"CUDA_DEVICE_MEMORY_LIMIT_01=1g"}),
            "CUDA_DEVICE_MEMORY_LIMIT_01=1g: '01' is not a device index (0 to 63)");
  EXPECT_EQ(environment_error({"CUDA_DEVICE_MEMORY_LIMIT_gpu0=1g"}),
            "CUDA_DEVICE_MEMORY_LIMIT_gpu0=1g: 'gpu0' is not a device index (0 to 63)");
  EXPECT_EQ(environment_error({"CUDA_DEVICE_MEMORY_LIMIT_=1g"}),
            "CUDA_DEVICE_MEMORY_LIMIT_=1g: '' is not a device index (0 to 63)");
}

TEST(HamiAliases, TheFirstAssignmentOfAPerDeviceNameCounts) {
  const Limits limits =
      read_environment({"CUDA_DEVICE_MEMORY_LIMIT_0=1g", "CUDA_DEVICE_MEMORY_LIMIT_0=2g"});
  EXPECT_EQ(limits.memory.for_device(0), bytes(kGiB));
  EXPECT_EQ(read_environment({"CUDA_DEVICE_MEMORY_LIMIT_0=", "CUDA_DEVICE_MEMORY_LIMIT_0=2g"}),
            kNoLimits);
}

TEST(HamiAliases, OtherHamiVariablesAreNotMemoryLimits) {
  EXPECT_EQ(read_environment({"CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/x",
                              "CUDA_DEVICE_MEMORY_LIMITS=1g", "CUDA_DEVICE_SM_LIMITS=50"}),
            kNoLimits);
  EXPECT_TRUE(read_environment({"CUDA_DEVICE_SM_LIMIT=50"}).memory.empty());
}

TEST(HamiAliases, TheSmLimitReadsAsGpulimitSm) {
  EXPECT_EQ(read_environment({"CUDA_DEVICE_SM_LIMIT=50"}).compute.sm_percent, 50u);
  EXPECT_EQ(read_environment({"CUDA_DEVICE_SM_LIMIT=100"}).compute.sm_percent, 100u);
  EXPECT_EQ(read_environment({"CUDA_DEVICE_SM_LIMIT=1"}).compute.sm_percent, 1u);
  // Agreeing: one cap, however each spells it.
  EXPECT_EQ(read_environment({"GPULIMIT_SM=30%", "CUDA_DEVICE_SM_LIMIT=30"}).compute.sm_percent,
            30u);
}

TEST(HamiAliases, AnSmLimitOfZeroIsHamisNoCap) {
  EXPECT_EQ(read_environment({"CUDA_DEVICE_SM_LIMIT=0"}), kNoLimits);
  // It sets nothing, so it cannot disagree with a cap gpulimit was given.
  EXPECT_EQ(read_environment({"GPULIMIT_SM=30", "CUDA_DEVICE_SM_LIMIT=0"}).compute.sm_percent, 30u);
  EXPECT_EQ(read_environment({"CUDA_DEVICE_SM_LIMIT=0", "GPULIMIT_SM=30"}).compute.sm_percent, 30u);
}

TEST(HamiAliases, AnSmLimitDisagreeingWithGpulimitSmIsAnErrorNamingBoth) {
  EXPECT_EQ(environment_error({"GPULIMIT_SM=30", "CUDA_DEVICE_SM_LIMIT=50"}),
            "GPULIMIT_SM=30 and CUDA_DEVICE_SM_LIMIT=50 disagree");
  EXPECT_EQ(environment_error({"CUDA_DEVICE_SM_LIMIT=100", "GPULIMIT_SM=99%"}),
            "GPULIMIT_SM=99% and CUDA_DEVICE_SM_LIMIT=100 disagree");
}

TEST(HamiAliases, AMalformedSmLimitIsAnErrorNamingIt) {
  for (const char* text : {"fifty", "101", "-1", "50.5"}) {
    EXPECT_EQ(
        environment_error({std::string("CUDA_DEVICE_SM_LIMIT=") + text}),
        std::string("CUDA_DEVICE_SM_LIMIT=") + text + ": not a percentage from 0 (no cap) to 100");
  }
}

TEST(CommandLineLimits, AFlagReplacesItsVariable) {
  const EnvironmentBlock block(
      {"GPULIMIT_MEM=junk", "GPULIMIT_DEVICE_MEM=0=1G", "GPULIMIT_TENANT=outer"});
  FlagValues flags;
  flags[static_cast<std::size_t>(OptionId::kMem)] = "2G";
  Limits limits;
  std::string error;
  ASSERT_TRUE(limits_from_command_line(block.get(), flags, limits, error)) << error;
  EXPECT_EQ(limits.memory.all, bytes(2 * kGiB));
  EXPECT_EQ(limits.memory.for_device(0), bytes(kGiB));
  EXPECT_EQ(limits.tenant, "outer");
}

TEST(CommandLineLimits, ErrorsNameTheFlag) {
  const auto error_for = [](OptionId id, std::string_view text,
                            std::initializer_list<std::string> environment = {}) {
    const EnvironmentBlock block(environment);
    FlagValues flags;
    flags[static_cast<std::size_t>(id)] = text;
    Limits limits;
    std::string error;
    EXPECT_FALSE(limits_from_command_line(block.get(), flags, limits, error));
    return error;
  };
  EXPECT_EQ(error_for(OptionId::kMem, "10Q"), "--mem 10Q: not a size" + kSizeExamples);
  EXPECT_EQ(error_for(OptionId::kMem, ""), "--mem '': not a size" + kSizeExamples);
  EXPECT_EQ(error_for(OptionId::kMem, "0%"), "--mem 0%: not a percentage from 1% to 100%");
  EXPECT_EQ(error_for(OptionId::kDeviceMem, "0=1G,0=1G"),
            "--device-mem 0=1G,0=1G: device 0 is given twice");
  EXPECT_EQ(error_for(OptionId::kMem, "2G", {"CUDA_DEVICE_MEMORY_LIMIT=1g"}),
            "--mem 2G and CUDA_DEVICE_MEMORY_LIMIT=1g disagree");
  EXPECT_EQ(error_for(OptionId::kDeviceMem, "0=2G", {"CUDA_DEVICE_MEMORY_LIMIT_0=1g"}),
            "--device-mem 0=2G and CUDA_DEVICE_MEMORY_LIMIT_0=1g disagree on device 0");
  // The rest of the environment is checked as the library will check it.
  EXPECT_EQ(error_for(OptionId::kMem, "1G", {"GPULIMIT_DEVICE_MEM=junk"}),
            "GPULIMIT_DEVICE_MEM=junk: 'junk' is not DEVICE=SIZE" + kListExample);
}

TEST(CommandLineLimits, ComputeFlagsReplaceTheirVariables) {
  const EnvironmentBlock block(
      {"GPULIMIT_SM=junk", "GPULIMIT_WEIGHT=0", "GPULIMIT_PRIORITY=low", "GPULIMIT_SOCKET=/s"});
  FlagValues flags;
  flags[static_cast<std::size_t>(OptionId::kSm)] = "30%";
  flags[static_cast<std::size_t>(OptionId::kWeight)] = "2";
  flags[static_cast<std::size_t>(OptionId::kPriority)] = "high";
  Limits limits;
  std::string error;
  ASSERT_TRUE(limits_from_command_line(block.get(), flags, limits, error)) << error;
  EXPECT_EQ(limits.compute, (ComputeLimits{30, 2, Priority::kHigh}));
  EXPECT_EQ(limits.socket, "/s");
}

TEST(CommandLineLimits, ComputeErrorsNameTheFlag) {
  const auto error_for = [](OptionId id, std::string_view text,
                            std::initializer_list<std::string> environment = {}) {
    const EnvironmentBlock block(environment);
    FlagValues flags;
    flags[static_cast<std::size_t>(id)] = text;
    Limits limits;
    std::string error;
    EXPECT_FALSE(limits_from_command_line(block.get(), flags, limits, error));
    return error;
  };
  EXPECT_EQ(error_for(OptionId::kSm, "0"), "--sm 0: zero is not a cap (examples: 30, 30%)");
  EXPECT_EQ(error_for(OptionId::kSm, "0%"), "--sm 0%: zero is not a cap (examples: 30, 30%)");
  EXPECT_EQ(error_for(OptionId::kSm, "101"), "--sm 101: " + kNotAnSmPercent);
  EXPECT_EQ(error_for(OptionId::kSm, "x"), "--sm x: " + kNotAnSmPercent);
  EXPECT_EQ(error_for(OptionId::kSm, ""), "--sm '': " + kNotAnSmPercent);
  EXPECT_EQ(error_for(OptionId::kWeight, "0"), "--weight 0: " + kNotAWeight);
  EXPECT_EQ(error_for(OptionId::kWeight, "1001"), "--weight 1001: " + kNotAWeight);
  EXPECT_EQ(error_for(OptionId::kPriority, "urgent"), "--priority urgent: " + kNotAPriority);
  EXPECT_EQ(error_for(OptionId::kSm, "30", {"CUDA_DEVICE_SM_LIMIT=50"}),
            "--sm 30 and CUDA_DEVICE_SM_LIMIT=50 disagree");
  EXPECT_EQ(error_for(OptionId::kWeight, "2", {"GPULIMIT_SOCKET=relative"}),
            "GPULIMIT_SOCKET=relative: not an absolute path");
}

TEST(CommandLineLimits, RowsWithoutAFlagIgnoreFlagValues) {
  FlagValues flags;
  flags[static_cast<std::size_t>(OptionId::kTenant)] = "not a tenant";
  flags[static_cast<std::size_t>(OptionId::kSocket)] = "relative";
  Limits limits;
  std::string error;
  ASSERT_TRUE(limits_from_command_line(nullptr, flags, limits, error)) << error;
  EXPECT_EQ(limits.tenant, "");
  EXPECT_EQ(limits.socket, "");
}

// What compute_limits_asked names, or "" when nothing asks for GPU time.
std::string compute_asked(std::initializer_list<std::string> environment,
                          std::initializer_list<std::pair<OptionId, std::string_view>> given = {}) {
  const EnvironmentBlock block(environment);
  FlagValues flags;
  for (const auto& [id, text] : given)
    flags[static_cast<std::size_t>(id)] = text;
  std::string source;
  return compute_limits_asked(block.get(), flags, source) ? source : "";
}

TEST(ComputeLimitsAsked, NamesTheFirstFlagOrVariable) {
  EXPECT_EQ(compute_asked({}, {{OptionId::kSm, "30"}}), "--sm 30");
  EXPECT_EQ(compute_asked({}, {{OptionId::kWeight, "1"}}), "--weight 1");
  EXPECT_EQ(compute_asked({}, {{OptionId::kPriority, "normal"}}), "--priority normal");
  EXPECT_EQ(compute_asked({"GPULIMIT_WEIGHT=2"}, {{OptionId::kPriority, "low"}}),
            "GPULIMIT_WEIGHT=2");
  EXPECT_EQ(compute_asked({"GPULIMIT_SM=10"}, {{OptionId::kSm, "20"}}), "--sm 20");
  EXPECT_EQ(compute_asked({"GPULIMIT_PRIORITY=high"}), "GPULIMIT_PRIORITY=high");
  EXPECT_EQ(compute_asked({"CUDA_DEVICE_SM_LIMIT=50"}), "CUDA_DEVICE_SM_LIMIT=50");
}

TEST(ComputeLimitsAsked, MemoryTheSocketAndHamisNoCapAskForNone) {
  EXPECT_EQ(compute_asked({}), "");
  EXPECT_EQ(compute_asked({"GPULIMIT_MEM=1G", "GPULIMIT_SOCKET=/s", "GPULIMIT_TENANT=t"},
                          {{OptionId::kMem, "2G"}}),
            "");
  EXPECT_EQ(compute_asked({"CUDA_DEVICE_SM_LIMIT=0"}), "");
  EXPECT_EQ(compute_asked({"GPULIMIT_SM=", "GPULIMIT_WEIGHT=", "CUDA_DEVICE_SM_LIMIT="}), "");
}

std::vector<std::string> render(const Limits& limits) {
  std::vector<std::string> assignments;
  EXPECT_TRUE(limits_to_environment(limits, assignments));
  return assignments;
}

TEST(Render, WritesEachValueInItsOneSpelling) {
  const std::pair<uint64_t, const char*> cases[] = {
      {10240 * kMiB, "10G"}, {1536 * kMiB, "1536M"}, {1023, "1023"},
      {1024, "1K"},          {3 * kGiB << 10, "3T"}, {UINT64_MAX, "18446744073709551615"},
  };
  for (const auto& [value, text] : cases) {
    Limits limits;
    limits.memory.all = bytes(value);
    EXPECT_EQ(render(limits), std::vector<std::string>{"GPULIMIT_MEM=" + std::string(text)});
  }
  Limits limits;
  limits.memory.all = percent(50);
  limits.memory.by_device = {{3, bytes(kGiB)}, {0, percent(20)}, {1, bytes(1536 * kMiB)}};
  limits.tenant = "train-42";
  limits.ledger_dir = "/tmp/ledgers";
  EXPECT_EQ(render(limits), (std::vector<std::string>{
                                "GPULIMIT_MEM=50%", "GPULIMIT_DEVICE_MEM=0=20%,1=1536M,3=1G",
                                "GPULIMIT_TENANT=train-42", "GPULIMIT_LEDGER_DIR=/tmp/ledgers"}));
}

TEST(Render, WritesGpusByUuidAfterOrdinalsAndReadsThemBack) {
  Limits limits;
  limits.memory.by_device = {{1, bytes(kGiB)}};
  limits.memory.by_uuid = {{kGpuA, percent(30)}};
  const std::vector<std::string> rendered = render(limits);
  EXPECT_EQ(rendered, std::vector<std::string>{"GPULIMIT_DEVICE_MEM=1=1G," + kGpuAText + "=30%"});
  std::vector<char*> envp;
  std::vector<std::string> storage = rendered;
  for (std::string& entry : storage)
    envp.push_back(entry.data());
  envp.push_back(nullptr);
  Limits read;
  std::string error;
  ASSERT_TRUE(limits_from_environment(envp.data(), read, error)) << error;
  EXPECT_EQ(read.memory, limits.memory);
}

TEST(Render, WritesTheComputeLimitsAndTheSocket) {
  Limits limits;
  limits.memory.all = bytes(kGiB);
  limits.compute = ComputeLimits{30, 2, Priority::kHigh};
  limits.tenant = "t";
  limits.socket = "/run/gpulimit/gpulimitd.sock";
  EXPECT_EQ(render(limits),
            (std::vector<std::string>{"GPULIMIT_MEM=1G", "GPULIMIT_SM=30", "GPULIMIT_WEIGHT=2",
                                      "GPULIMIT_PRIORITY=high", "GPULIMIT_TENANT=t",
                                      "GPULIMIT_SOCKET=/run/gpulimit/gpulimitd.sock"}));
  limits = kNoLimits;
  limits.compute.priority = Priority::kLow;
  EXPECT_EQ(render(limits), std::vector<std::string>{"GPULIMIT_PRIORITY=low"});
}

TEST(Render, LeavesOutWhatIsNotSet) {
  EXPECT_EQ(render(kNoLimits), std::vector<std::string>{});
  // The defaults, given or not, are left out too.
  EXPECT_EQ(render(read_environment(
                {"GPULIMIT_WEIGHT=1", "GPULIMIT_PRIORITY=normal", "CUDA_DEVICE_SM_LIMIT=0"})),
            std::vector<std::string>{});
}

TEST(Render, ReadsBackToTheSameLimits) {
  for (const std::initializer_list<std::string> environment : {
           std::initializer_list<std::string>{},
           {"GPULIMIT_MEM=10240M"},
           {"GPULIMIT_MEM=1%", "GPULIMIT_DEVICE_MEM=7=1K,2=100%", "GPULIMIT_TENANT=a.b_c-d"},
           {"CUDA_DEVICE_MEMORY_LIMIT=2048m", "CUDA_DEVICE_MEMORY_LIMIT_5=1048576k"},
           {"GPULIMIT_LEDGER_DIR=/dev/shm"},
           {"GPULIMIT_LEDGER_DIR=/run/user/1000/"},
           {"GPULIMIT_SM=30%", "GPULIMIT_WEIGHT=1000", "GPULIMIT_PRIORITY=low"},
           {"GPULIMIT_SM=100", "GPULIMIT_WEIGHT=1", "GPULIMIT_PRIORITY=normal"},
           {"GPULIMIT_SM=1", "GPULIMIT_PRIORITY=high", "GPULIMIT_SOCKET=/tmp/gpulimit-1000/s"},
           {"CUDA_DEVICE_SM_LIMIT=45", "GPULIMIT_WEIGHT=007"},
           {"CUDA_DEVICE_SM_LIMIT=0", "GPULIMIT_MEM=1G"},
       }) {
    const Limits limits = read_environment(environment);
    const EnvironmentBlock rendered(render(limits));
    Limits reread;
    std::string error;
    ASSERT_TRUE(limits_from_environment(rendered.get(), reread, error)) << error;
    EXPECT_EQ(reread, limits);
  }
}

}  // namespace
}  // namespace gpulimit::options
