#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "command_line.h"

namespace gpulimit::cupti_trace {
namespace {

WrapperParse parse(std::vector<std::string_view> arguments) {
  return parse_wrapper_arguments(arguments);
}

TEST(WrapperArguments, TakesTheFileAndTheCommand) {
  // Arrange, Act
  const WrapperParse sut = parse({"-o", "run.trace", "--", "spinner", "--kernels", "5"});

  // Assert
  ASSERT_TRUE(sut.options) << sut.error;
  EXPECT_EQ(sut.options->output, "run.trace");
  EXPECT_FALSE(sut.options->append);
  EXPECT_EQ(sut.options->command, (std::vector<std::string>{"spinner", "--kernels", "5"}));
}

TEST(WrapperArguments, TheCommandMayFollowWithoutDashes) {
  // Arrange, Act
  const WrapperParse sut = parse({"--output", "t", "--append", "python3", "-c", "pass"});

  // Assert
  ASSERT_TRUE(sut.options) << sut.error;
  EXPECT_TRUE(sut.options->append);
  EXPECT_EQ(sut.options->command, (std::vector<std::string>{"python3", "-c", "pass"}));
}

TEST(WrapperArguments, OptionsAfterTheCommandAreTheCommands) {
  // Arrange, Act
  const WrapperParse sut = parse({"-o", "t", "prog", "-o", "x"});

  // Assert
  ASSERT_TRUE(sut.options) << sut.error;
  EXPECT_EQ(sut.options->output, "t");
  EXPECT_EQ(sut.options->command, (std::vector<std::string>{"prog", "-o", "x"}));
}

TEST(WrapperArguments, HelpNeedsNothingElse) {
  // Arrange, Act
  const WrapperParse sut = parse({"--help"});

  // Assert
  ASSERT_TRUE(sut.options);
  EXPECT_TRUE(sut.options->help);
}

struct BadArguments {
  std::string_view name;
  std::vector<std::string_view> arguments;
  std::string_view error;
};

class WrapperArgumentErrors : public testing::TestWithParam<BadArguments> {};

TEST_P(WrapperArgumentErrors, SayWhatIsWrong) {
  // Arrange, Act
  const WrapperParse sut = parse(GetParam().arguments);

  // Assert
  EXPECT_FALSE(sut.options);
  EXPECT_EQ(sut.error, GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, WrapperArgumentErrors,
    testing::Values(
        BadArguments{"NoFile", {"--", "prog"}, "no trace file: give -o FILE"},
        BadArguments{"FileMissing", {"-o"}, "-o needs a FILE"},
        BadArguments{"FileEmpty", {"-o", "", "prog"}, "-o needs a FILE"},
        BadArguments{"NoCommand", {"-o", "t"}, "no command to run"},
        BadArguments{"NoCommandAfterDashes", {"-o", "t", "--"}, "no command to run"},
        BadArguments{"FileTwice", {"-o", "t", "-o", "u", "prog"}, "the trace file is given twice"},
        BadArguments{"UnknownOption", {"-x", "-o", "t", "prog"}, "unknown option -x"}),
    [](const testing::TestParamInfo<BadArguments>& param_info) {
      return std::string(param_info.param.name);
    });

TEST(PreloadWithTracer, AppendsAfterWhatIsPreloaded) {
  // Arrange, Act
  const std::string sut =
      preload_with_tracer("/opt/lib/libgpulimit.so other.so", "/b/libgpulimit-cupti-trace.so");

  // Assert: libgpulimit.so keeps its place in front
  EXPECT_EQ(sut, "/opt/lib/libgpulimit.so:other.so:/b/libgpulimit-cupti-trace.so");
}

TEST(PreloadWithTracer, DropsAnotherCopyOfTheTracer) {
  // Arrange, Act
  const std::string sut = preload_with_tracer("/old/libgpulimit-cupti-trace.so::a.so",
                                              "/new/libgpulimit-cupti-trace.so");

  // Assert
  EXPECT_EQ(sut, "a.so:/new/libgpulimit-cupti-trace.so");
}

TEST(PreloadWithTracer, IsTheLibraryAloneWhenNothingIsPreloaded) {
  EXPECT_EQ(preload_with_tracer("", "/b/libgpulimit-cupti-trace.so"),
            "/b/libgpulimit-cupti-trace.so");
}

}  // namespace
}  // namespace gpulimit::cupti_trace
