// A job step's limits from its options, its shards and the plugin's
// defaults and maxima.
#include "step_limits.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpulimit::slurm {
namespace {

using options::Amount;
using options::Priority;

constexpr std::size_t kMem = 0;
constexpr std::size_t kSm = 1;
constexpr std::size_t kWeight = 2;
constexpr std::size_t kPriority = 3;

PluginSettings settings_from(std::vector<const char*> words) {
  words.insert(words.begin(), "library=/usr/lib/libgpulimit.so");
  PluginSettings settings;
  std::string error;
  EXPECT_TRUE(parse_plugin_arguments(static_cast<int>(words.size()), words.data(), settings, error))
      << error;
  return settings;
}

TEST(StepOptions, RowsAreTheGpulimitOptions) {
  EXPECT_EQ(kStepOptions[kMem].id, options::OptionId::kMem);
  EXPECT_EQ(kStepOptions[kSm].id, options::OptionId::kSm);
  EXPECT_EQ(kStepOptions[kWeight].id, options::OptionId::kWeight);
  EXPECT_EQ(kStepOptions[kPriority].id, options::OptionId::kPriority);
}

TEST(CheckStepOption, AcceptsWhatGpulimitAccepts) {
  // Arrange
  const PluginSettings settings = settings_from({});
  std::string error;

  // Act, Assert
  EXPECT_TRUE(check_step_option(kMem, "10G", settings, error)) << error;
  EXPECT_TRUE(check_step_option(kMem, "50%", settings, error)) << error;
  EXPECT_TRUE(check_step_option(kSm, "30%", settings, error)) << error;
  EXPECT_TRUE(check_step_option(kWeight, "1000", settings, error)) << error;
  EXPECT_TRUE(check_step_option(kPriority, "high", settings, error)) << error;
}

struct Refusal {
  std::size_t row;
  const char* text;
  std::vector<const char*> arguments;
  std::string error;
};

class CheckStepOptionRefuses : public ::testing::TestWithParam<Refusal> {};

TEST_P(CheckStepOptionRefuses, NamingTheOption) {
  // Arrange
  const PluginSettings settings = settings_from(GetParam().arguments);
  std::string error;

  // Act
  const bool accepted = check_step_option(GetParam().row, GetParam().text, settings, error);

  // Assert
  EXPECT_FALSE(accepted);
  EXPECT_EQ(error, GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Values, CheckStepOptionRefuses,
    ::testing::Values(
        Refusal{kMem, "banana", {}, "--gpu-mem=banana: not a size (examples: 10G, 512M, 50%)"},
        Refusal{kMem, "0", {}, "--gpu-mem=0: zero is not a cap (examples: 10G, 512M, 50%)"},
        Refusal{kSm, "0", {}, "--gpu-sm=0: zero is not a cap (examples: 30, 30%)"},
        Refusal{kWeight, "1001", {}, "--gpu-weight=1001: not a whole number from 1 to 1000"},
        Refusal{kPriority, "HIGH", {}, "--gpu-priority=HIGH: not a priority (high, normal or low)"},
        Refusal{kMem, "41G", {"max_mem=40G"}, "--gpu-mem=41G: above this cluster's maximum of 40G"},
        Refusal{kMem,
                "50%",
                {"max_mem=40G"},
                "--gpu-mem=50%: this cluster allows at most 40G; give a size of at most that"},
        Refusal{kSm, "60", {"max_sm=50"}, "--gpu-sm=60: above this cluster's maximum of 50%"},
        Refusal{
            kWeight, "5", {"max_weight=4"}, "--gpu-weight=5: above this cluster's maximum of 4"},
        Refusal{kPriority,
                "high",
                {"max_priority=normal"},
                "--gpu-priority=high: above this cluster's maximum of normal"}));

TEST(StepLimits, OptionsReplaceDefaults) {
  // Arrange
  const PluginSettings settings =
      settings_from({"default_mem=4G", "default_weight=2", "socket=/run/s.sock"});
  StepRequest request;
  request[kMem] = "10G";
  request[kPriority] = "high";
  options::Limits sut;
  std::string error;

  // Act
  const bool made = step_limits(settings, request, std::nullopt, sut, error);

  // Assert
  ASSERT_TRUE(made) << error;
  EXPECT_EQ(sut.memory.all, (Amount{Amount::Kind::kBytes, 10ull << 30}));
  EXPECT_EQ(sut.compute.weight, 2u);
  EXPECT_EQ(sut.compute.priority, Priority::kHigh);
  EXPECT_EQ(sut.compute.sm_percent, 0u);
  EXPECT_EQ(sut.socket, "/run/s.sock");
  EXPECT_EQ(sut.ledger_dir, "/dev/shm");
}

TEST(StepLimits, MaximaCapAStepThatAsksForNothing) {
  // Arrange
  const PluginSettings settings = settings_from({"max_mem=16G", "max_sm=50"});
  options::Limits sut;
  std::string error;

  // Act
  const bool made = step_limits(settings, StepRequest{}, std::nullopt, sut, error);

  // Assert
  ASSERT_TRUE(made) << error;
  EXPECT_EQ(sut.memory.all, (Amount{Amount::Kind::kBytes, 16ull << 30}));
  EXPECT_EQ(sut.compute.sm_percent, 50u);
}

TEST(StepLimits, ShardsSetMemoryAndWeightAheadOfDefaults) {
  // Arrange
  const PluginSettings settings = settings_from({"default_mem=4G", "shards_per_gpu=8"});
  const std::optional<unsigned> share = shard_percent(2, settings.shards_per_gpu);
  options::Limits sut;
  std::string error;

  // Act
  const bool made = step_limits(settings, StepRequest{}, share, sut, error);

  // Assert
  ASSERT_TRUE(made) << error;
  EXPECT_EQ(sut.memory.all, (Amount{Amount::Kind::kPercent, 25}));
  EXPECT_EQ(sut.compute.weight, 25u);
}

TEST(StepLimits, OptionsReplaceShards) {
  // Arrange
  const PluginSettings settings = settings_from({"shards_per_gpu=4"});
  StepRequest request;
  request[kMem] = "2G";
  request[kWeight] = "3";
  options::Limits sut;
  std::string error;

  // Act
  const bool made = step_limits(settings, request, shard_percent(1, 4), sut, error);

  // Assert
  ASSERT_TRUE(made) << error;
  EXPECT_EQ(sut.memory.all, (Amount{Amount::Kind::kBytes, 2ull << 30}));
  EXPECT_EQ(sut.compute.weight, 3u);
}

TEST(StepLimits, ShardShareStaysUnderAPercentMaximum) {
  // Arrange
  const PluginSettings settings = settings_from({"shards_per_gpu=4", "max_mem=30%"});
  options::Limits sut;
  std::string error;

  // Act
  const bool made = step_limits(settings, StepRequest{}, shard_percent(2, 4), sut, error);

  // Assert
  ASSERT_TRUE(made) << error;
  EXPECT_EQ(sut.memory.all, (Amount{Amount::Kind::kPercent, 30}));
  EXPECT_EQ(sut.compute.weight, 50u);
}

TEST(StepLimits, RefusesAnOptionAboveItsMaximumAndKeepsOut) {
  // Arrange
  const PluginSettings settings = settings_from({"max_weight=4"});
  StepRequest request;
  request[kWeight] = "9";
  options::Limits sut;
  sut.tenant = "untouched";
  std::string error;

  // Act
  const bool made = step_limits(settings, request, std::nullopt, sut, error);

  // Assert
  EXPECT_FALSE(made);
  EXPECT_EQ(error, "--gpu-weight=9: above this cluster's maximum of 4");
  EXPECT_EQ(sut.tenant, "untouched");
}

TEST(ShardPercent, IsTheStepsPartOfOneGpuRoundedDown) {
  EXPECT_EQ(shard_percent(1, 8), 12u);
  EXPECT_EQ(shard_percent(8, 8), 100u);
  EXPECT_EQ(shard_percent(12, 8), 100u);  // shards of two GPUs: each is whole
  EXPECT_EQ(shard_percent(1, 1000), 1u);  // never below 1 %
  EXPECT_EQ(shard_percent(0, 8), std::nullopt);
  EXPECT_EQ(shard_percent(std::nullopt, 8), std::nullopt);
  EXPECT_EQ(shard_percent(2, 0), std::nullopt);
}

TEST(ParseShardCount, ReadsWholeNumbersOnly) {
  EXPECT_EQ(parse_shard_count("3"), 3u);
  EXPECT_EQ(parse_shard_count(""), std::nullopt);
  EXPECT_EQ(parse_shard_count("3,1"), std::nullopt);
  EXPECT_EQ(parse_shard_count("-1"), std::nullopt);
}

TEST(StepIsLimited, OnlyWhenSomethingAsksForIt) {
  // Arrange
  const PluginSettings plain = settings_from({});
  const PluginSettings with_default = settings_from({"default_mem=1G"});
  StepRequest asked;
  asked[kSm] = "30";

  // Act, Assert
  EXPECT_FALSE(step_is_limited(plain, StepRequest{}, std::nullopt));
  EXPECT_TRUE(step_is_limited(plain, asked, std::nullopt));
  EXPECT_TRUE(step_is_limited(plain, StepRequest{}, 25u));
  EXPECT_TRUE(step_is_limited(with_default, StepRequest{}, std::nullopt));
}

}  // namespace
}  // namespace gpulimit::slurm
