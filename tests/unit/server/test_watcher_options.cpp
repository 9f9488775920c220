// gpulimitd's watcher options: --watch, --unmanaged, --cross-check-ms.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpulimit/server/daemon/command_line.h"

namespace gpulimit::server {
namespace {

std::variant<DaemonOptions, CommandLineExit> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "gpulimitd");
  std::vector<const char*> environment = {nullptr};
  return parse_command_line(static_cast<int>(args.size()), args.data(),
                            const_cast<char* const*>(environment.data()), 1234);
}

TEST(WatcherOptions, DefaultsToAutoWarnAndACheckEveryTwoSeconds) {
  const auto sut = std::get<DaemonOptions>(parse({}));

  EXPECT_EQ(sut.server.watcher.mode, WatchMode::kAuto);
  EXPECT_EQ(sut.server.watcher.unmanaged_default, UnmanagedAction::kWarn);
  EXPECT_EQ(sut.server.watcher.cross_check_interval_ns, 2'000 * kNsPerMs);
  EXPECT_TRUE(sut.server.watcher.pidfd_exits);
}

TEST(WatcherOptions, TakesEachModeAndAction) {
  const auto sut = std::get<DaemonOptions>(
      parse({"--watch=off", "--unmanaged", "kill", "--cross-check-ms", "0"}));

  EXPECT_EQ(sut.server.watcher.mode, WatchMode::kOff);
  EXPECT_EQ(sut.server.watcher.unmanaged_default, UnmanagedAction::kKill);
  EXPECT_EQ(sut.server.watcher.cross_check_interval_ns, 0);
}

TEST(WatcherOptions, RefusesAnUnknownModeWithOneLine) {
  const auto sut = std::get<CommandLineExit>(parse({"--watch=sometimes"}));

  EXPECT_EQ(sut.status, 2);
  EXPECT_TRUE(sut.to_stderr);
  EXPECT_NE(sut.output.find("--watch"), std::string::npos) << sut.output;
  EXPECT_EQ(sut.output.find('\n'), sut.output.size() - 1) << "one line: " << sut.output;
}

TEST(WatcherOptions, RefusesAnUnknownAction) {
  const auto sut = std::get<CommandLineExit>(parse({"--unmanaged=ignore"}));

  EXPECT_EQ(sut.status, 2);
  EXPECT_NE(sut.output.find("--unmanaged"), std::string::npos) << sut.output;
}

TEST(WatcherOptions, NamesRoundTrip) {
  for (const WatchMode mode : {WatchMode::kAuto, WatchMode::kOn, WatchMode::kOff})
    EXPECT_EQ(parse_watch_mode(watch_mode_name(mode)), mode);
  for (const UnmanagedAction action :
       {UnmanagedAction::kAllow, UnmanagedAction::kWarn, UnmanagedAction::kKill})
    EXPECT_EQ(parse_unmanaged_action(unmanaged_action_name(action)), action);
  EXPECT_FALSE(parse_watch_mode("ON"));
  EXPECT_FALSE(parse_unmanaged_action(""));
}

}  // namespace
}  // namespace gpulimit::server
