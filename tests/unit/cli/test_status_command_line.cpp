#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "status/status_command_line.h"

namespace gpulimit::cli {
namespace {

using Words = std::vector<std::string_view>;

std::string error_of(const Words& args) {
  StatusOptions options;
  std::string error;
  EXPECT_FALSE(parse_status_arguments(args, options, error));
  return error;
}

TEST(StatusCommandLine, TablesByDefaultJsonOnRequest) {
  StatusOptions sut;
  std::string error;
  ASSERT_TRUE(parse_status_arguments({}, sut, error)) << error;
  EXPECT_FALSE(sut.json);
  EXPECT_FALSE(sut.help);

  StatusOptions json;
  ASSERT_TRUE(parse_status_arguments(Words{"--json"}, json, error)) << error;
  EXPECT_TRUE(json.json);
}

TEST(StatusCommandLine, Help) {
  for (const std::string_view flag : {"--help", "-h"}) {
    StatusOptions sut;
    std::string error;
    ASSERT_TRUE(parse_status_arguments(Words{flag}, sut, error)) << error;
    EXPECT_TRUE(sut.help);
  }
}

TEST(StatusCommandLine, RefusesOtherArguments) {
  EXPECT_EQ(error_of({"--mem", "1G"}),
            "status: unknown argument --mem (usage: gpulimit status [--json])");
  EXPECT_EQ(error_of({"--json", "x"}),
            "status: unknown argument x (usage: gpulimit status [--json])");
}

}  // namespace
}  // namespace gpulimit::cli
