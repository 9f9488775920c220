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
  EXPECT_EQ(list_error("0"), "'0' is not INDEX=SIZE" + kListExample);
  EXPECT_EQ(list_error("10G"), "'10G' is not INDEX=SIZE" + kListExample);
  EXPECT_EQ(list_error("0=1G,1"), "'1' is not INDEX=SIZE" + kListExample);
  EXPECT_EQ(list_error("0:1G"), "'0:1G' is not INDEX=SIZE" + kListExample);
}

TEST(DeviceAmounts, RefusesBadIndices) {
  EXPECT_EQ(list_error("=1G"), "'' is not a device index (0 to 63)");
  EXPECT_EQ(list_error("64=1G"), "'64' is not a device index (0 to 63)");
  EXPECT_EQ(list_error("1000000=1G"), "'1000000' is not a device index (0 to 63)");
  EXPECT_EQ(list_error("01=1G"), "'01' is not a device index (0 to 63)");
  EXPECT_EQ(list_error("-1=1G"), "'-1' is not a device index (0 to 63)");
  EXPECT_EQ(list_error(" 0=1G"), "' 0' is not a device index (0 to 63)");
  EXPECT_EQ(list_error("0=1G,gpu1=1G"), "'gpu1' is not a device index (0 to 63)");
}

TEST(DeviceAmounts, RefusesBadAmountsNamingTheDevice) {
  EXPECT_EQ(list_error("0="), "device 0: not a size" + kSizeExamples);
  EXPECT_EQ(list_error("0=1G,3=0"), "device 3: zero is not a cap" + kSizeExamples);
  EXPECT_EQ(list_error("2=101%"), "device 2: not a percentage from 1% to 100%");
  EXPECT_EQ(list_error("0=1G=2G"), "device 0: not a size" + kSizeExamples);
  EXPECT_EQ(list_error("0=1G;1=2G"), "device 0: not a size" + kSizeExamples);
  EXPECT_EQ(list_error("0=1G, 1=2G"), "' 1' is not a device index (0 to 63)");
}

TEST(DeviceAmounts, RefusesADeviceGivenTwice) {
  EXPECT_EQ(list_error("0=1G,0=2G"), "device 0 is given twice");
  EXPECT_EQ(list_error("1=1G,0=5%,1=1G"), "device 1 is given twice");
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

TEST(Environment, NothingSetMeansNoLimits) {
  Limits limits;
  std::string error;
  ASSERT_TRUE(limits_from_environment(nullptr, limits, error));
  EXPECT_EQ(limits, kNoLimits);
  EXPECT_TRUE(limits.memory.empty());
  EXPECT_EQ(limits.ledger_dir, "/dev/shm");

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
  EXPECT_EQ(environment_error({"GPULIMIT_DEVICE_MEM=64=1G"}),
            "GPULIMIT_DEVICE_MEM=64=1G: '64' is not a device index (0 to 63)");
  EXPECT_EQ(environment_error({"GPULIMIT_TENANT=my job"}),
            "GPULIMIT_TENANT=my job: not a tenant id (1 to 64 characters of A-Z a-z 0-9 . _ -)");
  EXPECT_EQ(environment_error({"GPULIMIT_LEDGER_DIR=ledgers"}),
            "GPULIMIT_LEDGER_DIR=ledgers: not an absolute path");
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
                              "CUDA_DEVICE_MEMORY_LIMIT_0="}),
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
  EXPECT_EQ(read_environment({"CUDA_DEVICE_SM_LIMIT=50", "CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/x",
                              "CUDA_DEVICE_MEMORY_LIMITS=1g"}),
            kNoLimits);
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
            "GPULIMIT_DEVICE_MEM=junk: 'junk' is not INDEX=SIZE" + kListExample);
}

TEST(CommandLineLimits, RowsWithoutAFlagIgnoreFlagValues) {
  FlagValues flags;
  flags[static_cast<std::size_t>(OptionId::kTenant)] = "not a tenant";
  Limits limits;
  std::string error;
  ASSERT_TRUE(limits_from_command_line(nullptr, flags, limits, error)) << error;
  EXPECT_EQ(limits.tenant, "");
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

TEST(Render, LeavesOutWhatIsNotSet) {
  EXPECT_EQ(render(kNoLimits), std::vector<std::string>{});
}

TEST(Render, ReadsBackToTheSameLimits) {
  for (const std::initializer_list<std::string> environment : {
           std::initializer_list<std::string>{},
           {"GPULIMIT_MEM=10240M"},
           {"GPULIMIT_MEM=1%", "GPULIMIT_DEVICE_MEM=7=1K,2=100%", "GPULIMIT_TENANT=a.b_c-d"},
           {"CUDA_DEVICE_MEMORY_LIMIT=2048m", "CUDA_DEVICE_MEMORY_LIMIT_5=1048576k"},
           {"GPULIMIT_LEDGER_DIR=/dev/shm"},
           {"GPULIMIT_LEDGER_DIR=/run/user/1000/"},
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
