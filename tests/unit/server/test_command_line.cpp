// gpulimitd's options and what they become.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpulimit/server/daemon/command_line.h"

namespace gpulimit::server {
namespace {

std::variant<DaemonOptions, CommandLineExit> parse(std::vector<const char*> args,
                                                   std::vector<const char*> environment = {}) {
  args.insert(args.begin(), "gpulimitd");
  environment.push_back(nullptr);
  return parse_command_line(static_cast<int>(args.size()), args.data(),
                            const_cast<char* const*>(environment.data()), 1234);
}

TEST(ServerCommandLine, DefaultsToAPerUserServer) {
  const auto sut = std::get<DaemonOptions>(parse({}, {"XDG_RUNTIME_DIR=/run/user/1234"}));

  EXPECT_EQ(sut.server.mode, ServerMode::kUser);
  EXPECT_EQ(sut.server.socket_path, "/run/user/1234/gpulimit/gpulimitd.sock");
  EXPECT_TRUE(sut.server.own_socket_directory);
  EXPECT_EQ(sut.server.scheduler.quantum_ns, 20 * kNsPerMs);
  EXPECT_EQ(sut.server.scheduler.ack_timeout_ns, 100 * kNsPerMs);
  EXPECT_EQ(sut.server.idle_exit_ns, 30'000 * kNsPerMs);
  EXPECT_FALSE(sut.foreground);
  EXPECT_EQ(sut.log_file, "/run/user/1234/gpulimit/gpulimitd.log");
}

TEST(ServerCommandLine, WithoutARuntimeDirectoryTheSocketIsInTmp) {
  const auto sut = std::get<DaemonOptions>(parse({"--foreground"}));

  EXPECT_EQ(sut.server.socket_path, "/tmp/gpulimit-1234/gpulimitd.sock");
  EXPECT_EQ(sut.log_file, "") << "the foreground logs to stderr";
}

TEST(ServerCommandLine, SystemModeNeverIdlesOut) {
  const auto sut = std::get<DaemonOptions>(parse({"--system", "--idle-exit-s", "5"}));

  EXPECT_EQ(sut.server.mode, ServerMode::kSystem);
  EXPECT_EQ(sut.server.socket_path, "/run/gpulimit/gpulimitd.sock");
  EXPECT_EQ(sut.server.idle_exit_ns, 0);
  EXPECT_EQ(sut.log_file, "/var/log/gpulimitd.log");
}

TEST(ServerCommandLine, TheAckTimeoutFollowsTheQuantumUnlessGiven) {
  const auto derived = std::get<DaemonOptions>(parse({"--quantum-ms", "50"}));
  const auto given =
      std::get<DaemonOptions>(parse({"--quantum-ms", "50", "--ack-timeout-ms", "70"}));

  EXPECT_EQ(derived.server.scheduler.ack_timeout_ns, 250 * kNsPerMs);
  EXPECT_EQ(given.server.scheduler.ack_timeout_ns, 70 * kNsPerMs);
}

TEST(ServerCommandLine, ASocketGivenIsNotTheServersToLockDown) {
  const auto sut =
      std::get<DaemonOptions>(parse({"--socket", "/tmp/x/s.sock", "--log-level", "debug"}));

  EXPECT_EQ(sut.server.socket_path, "/tmp/x/s.sock");
  EXPECT_FALSE(sut.server.own_socket_directory);
  EXPECT_EQ(sut.log_level, "debug");
}

TEST(ServerCommandLine, ALaterOptionOverridesAnEarlierOne) {
  const auto sut = std::get<DaemonOptions>(parse({"--quantum-ms", "5", "--quantum-ms", "7"}));

  EXPECT_EQ(sut.server.scheduler.quantum_ns, 7 * kNsPerMs);
}

TEST(ServerCommandLine, BadValuesExitWithStatus2AndOneLine) {
  for (const auto& args : std::vector<std::vector<const char*>>{
           {"--quantum-ms", "0"}, {"--log-level", "loud"}, {"--bogus"}, {"--idle-exit-s", "-1"}}) {
    const auto sut = std::get<CommandLineExit>(parse(args));
    EXPECT_EQ(sut.status, 2) << args[0];
    EXPECT_TRUE(sut.to_stderr);
    EXPECT_TRUE(sut.output.starts_with("gpulimitd: ")) << sut.output;
    EXPECT_EQ(sut.output.find('\n'), sut.output.size() - 1) << sut.output;
  }
}

TEST(ServerCommandLine, HelpGoesToStdout) {
  const auto sut = std::get<CommandLineExit>(parse({"--help"}));

  EXPECT_EQ(sut.status, 0);
  EXPECT_FALSE(sut.to_stderr);
  EXPECT_NE(sut.output.find("--quantum-ms"), std::string::npos);
  EXPECT_NE(sut.output.find("--system"), std::string::npos);
}

}  // namespace
}  // namespace gpulimit::server
