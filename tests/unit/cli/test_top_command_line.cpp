// `gpulimit top`'s arguments: the words after "top".
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "top/top_command_line.h"

namespace gpulimit::cli {
namespace {

using std::chrono::milliseconds;

TopOptions parsed(const std::vector<std::string_view>& args) {
  TopOptions options;
  std::string error;
  EXPECT_TRUE(parse_top_arguments(args, options, error)) << error;
  return options;
}

std::string refused(const std::vector<std::string_view>& args) {
  TopOptions options;
  options.iterations = 77;
  std::string error;
  EXPECT_FALSE(parse_top_arguments(args, options, error));
  EXPECT_EQ(options.iterations, 77u) << "changed on failure";
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_NE(error.find(kTopUsage), std::string::npos) << error;
  return error;
}

TEST(TopCommandLine, DefaultsAreAViewRefreshedEverySecondUntilQuit) {
  const TopOptions sut = parsed({});

  EXPECT_EQ(sut.interval, milliseconds(1000));
  EXPECT_FALSE(sut.batch);
  EXPECT_EQ(sut.iterations, 0u);
  EXPECT_FALSE(sut.help);
}

TEST(TopCommandLine, EveryOptionInBothSpellings) {
  const TopOptions spaced = parsed({"--batch", "--iterations", "2", "--interval", "0.5"});
  const TopOptions joined = parsed({"--interval=2.25", "--iterations=10"});

  EXPECT_TRUE(spaced.batch);
  EXPECT_EQ(spaced.iterations, 2u);
  EXPECT_EQ(spaced.interval, milliseconds(500));
  EXPECT_FALSE(joined.batch);
  EXPECT_EQ(joined.iterations, 10u);
  EXPECT_EQ(joined.interval, milliseconds(2250));
  EXPECT_TRUE(parsed({"-h"}).help);
  EXPECT_TRUE(parsed({"--batch", "--help"}).help);
}

TEST(TopCommandLine, IntervalsInRange) {
  const std::pair<std::string_view, milliseconds> good[] = {
      {"0.1", milliseconds(100)},   {"1", milliseconds(1000)},   {"3600", milliseconds(3'600'000)},
      {"0.125", milliseconds(125)}, {"007", milliseconds(7000)},
  };
  for (const auto& [text, expected] : good) {
    milliseconds out{};
    EXPECT_TRUE(parse_interval(text, out)) << text;
    EXPECT_EQ(out, expected) << text;
  }
  for (const std::string_view text : {"", "0", "0.09", "3600.001", "-1", "+1", "1e3", "inf", "nan",
                                      "1s", " 1", ".5", "1.", "1.2345", "99999999"}) {
    milliseconds out{42};
    EXPECT_FALSE(parse_interval(text, out)) << text;
    EXPECT_EQ(out, milliseconds(42)) << text;
  }
}

TEST(TopCommandLine, RefusesMalformedArgumentsInOneLine) {
  EXPECT_NE(refused({"--interval"}).find("--interval needs a value"), std::string::npos);
  EXPECT_NE(refused({"--interval", "fast"}).find("not 'fast'"), std::string::npos);
  EXPECT_NE(refused({"--interval", "0"}).find("from 0.1 to 3600"), std::string::npos);
  EXPECT_NE(refused({"--iterations", "0"}).find("--iterations needs a whole number"),
            std::string::npos);
  EXPECT_NE(refused({"--iterations", "-3"}).find("not '-3'"), std::string::npos);
  EXPECT_NE(refused({"--iterations", "99999999999"}).find("--iterations"), std::string::npos);
  EXPECT_NE(refused({"--iterations=1", "--iterations=2"}).find("given twice"), std::string::npos);
  EXPECT_NE(refused({"--batch", "--batch"}).find("--batch is given twice"), std::string::npos);
  EXPECT_NE(refused({"--batch=yes"}).find("--batch takes no value"), std::string::npos);
  EXPECT_NE(refused({"-b"}).find("unknown argument -b"), std::string::npos);
  EXPECT_NE(refused({"--json"}).find("unknown argument --json"), std::string::npos);
}

}  // namespace
}  // namespace gpulimit::cli
