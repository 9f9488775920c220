// The plugstack.conf arguments of gpulimit_spank.so.
#include "plugin_settings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpulimit::slurm {
namespace {

using options::Amount;
using options::Priority;

bool parse(const std::vector<const char*>& words, PluginSettings& out, std::string& error) {
  return parse_plugin_arguments(static_cast<int>(words.size()), words.data(), out, error);
}

TEST(PluginSettings, ReadsEveryArgument) {
  // Arrange
  const std::vector<const char*> words = {"library=/usr/lib/libgpulimit.so",
                                          "socket=/run/g/g.sock",
                                          "ledger_dir=/dev/shm/g",
                                          "default_mem=8G",
                                          "default_sm=50",
                                          "default_weight=2",
                                          "default_priority=low",
                                          "max_mem=40G",
                                          "max_sm=80%",
                                          "max_weight=10",
                                          "max_priority=normal",
                                          "shards_per_gpu=8"};
  PluginSettings sut;
  std::string error;

  // Act
  const bool parsed = parse(words, sut, error);

  // Assert
  ASSERT_TRUE(parsed) << error;
  EXPECT_EQ(sut.library, "/usr/lib/libgpulimit.so");
  EXPECT_EQ(sut.socket, "/run/g/g.sock");
  EXPECT_EQ(sut.ledger_dir, "/dev/shm/g");
  EXPECT_EQ(sut.defaults.memory.all, (Amount{Amount::Kind::kBytes, 8ull << 30}));
  EXPECT_EQ(sut.defaults.compute.sm_percent, 50u);
  EXPECT_EQ(sut.defaults.compute.weight, 2u);
  EXPECT_EQ(sut.defaults.compute.priority, Priority::kLow);
  EXPECT_EQ(sut.max_mem, (Amount{Amount::Kind::kBytes, 40ull << 30}));
  EXPECT_EQ(sut.max_sm, 80u);
  EXPECT_EQ(sut.max_weight, 10u);
  EXPECT_EQ(sut.max_priority, Priority::kNormal);
  EXPECT_EQ(sut.shards_per_gpu, 8u);
  EXPECT_TRUE(sut.limits_every_step());
}

TEST(PluginSettings, LibraryAloneSetsTheSystemServerAndNoLimits) {
  // Arrange
  PluginSettings sut;
  std::string error;

  // Act
  const bool parsed = parse({"library=/opt/gpulimit/lib/libgpulimit.so"}, sut, error);

  // Assert
  ASSERT_TRUE(parsed) << error;
  EXPECT_EQ(sut.socket, "/run/gpulimit/gpulimitd.sock");
  EXPECT_EQ(sut.ledger_dir, "/dev/shm");
  EXPECT_TRUE(sut.defaults.memory.empty());
  EXPECT_FALSE(sut.limits_every_step());
}

struct BadArguments {
  std::vector<const char*> words;
  std::string error;
};

class PluginSettingsRefuses : public ::testing::TestWithParam<BadArguments> {};

TEST_P(PluginSettingsRefuses, WithOneLineAndNothingChanged) {
  // Arrange
  PluginSettings sut;
  sut.library = "/untouched";
  std::string error;

  // Act
  const bool parsed = parse(GetParam().words, sut, error);

  // Assert
  EXPECT_FALSE(parsed);
  EXPECT_EQ(error, GetParam().error);
  EXPECT_EQ(sut.library, "/untouched");
}

INSTANTIATE_TEST_SUITE_P(
    Arguments, PluginSettingsRefuses,
    ::testing::Values(
        BadArguments{{"socket=/s"},
                     "library=PATH (the absolute path of libgpulimit.so) is missing"},
        BadArguments{{"library=/l", "max_mem=lots"},
                     "max_mem=lots: not a size (examples: 10G, 512M, 50%)"},
        BadArguments{{"library=/l", "default_weight=0"},
                     "default_weight=0: not a whole number from 1 to 1000"},
        BadArguments{{"library=lib.so"}, "library=lib.so: not an absolute path"},
        BadArguments{{"library=/l", "default_priority=urgent"},
                     "default_priority=urgent: not a priority (high, normal or low)"},
        BadArguments{{"library=/l", "shards_per_gpu=0"},
                     "shards_per_gpu=0: not a whole number from 1 to 100000"},
        BadArguments{{"library=/l", "default_weight=5", "max_weight=4"},
                     "default_weight 5 is above max_weight 4"},
        BadArguments{{"library=/l", "default_mem=50%", "max_mem=8G"},
                     "default_mem: this cluster allows at most 8G; give a size of at most that"},
        BadArguments{{"library=/l", "default_mem=10G", "max_mem=8G"},
                     "default_mem: above this cluster's maximum of 8G"},
        BadArguments{{"library=/l", "verbose"},
                     "'verbose' is not NAME=VALUE with NAME one of library, socket, ledger_dir, "
                     "default_mem, default_sm, default_weight, default_priority, max_mem, max_sm, "
                     "max_weight, max_priority, shards_per_gpu"}));

}  // namespace
}  // namespace gpulimit::slurm
