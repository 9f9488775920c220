// gpulimitd: parses its options, detaches unless --foreground, and runs the
// server (gpulimit_server) until it is stopped.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/server/daemon/command_line.h"
#include "gpulimit/server/daemon/daemon_process.h"
#include "gpulimit/server/daemon/enforcement_marker.h"
#include "gpulimit/server/loop/server.h"

int main(int argc, char** argv) {
  namespace server = gpulimit::server;

  auto parsed = server::parse_command_line(argc, argv, environ, getuid());
  if (const auto* exit = std::get_if<server::CommandLineExit>(&parsed)) {
    std::fputs(exit->output.c_str(), exit->to_stderr ? stderr : stdout);
    return exit->status;
  }
  const auto& options = std::get<server::DaemonOptions>(parsed);

  signal(SIGPIPE, SIG_IGN);
  // The log file and lock file: private to the user in per-user mode.
  umask(options.server.mode == server::ServerMode::kSystem ? 022 : 077);

  std::unique_ptr<server::BackgroundStart> background;
  if (!options.foreground) {
    auto detached = server::BackgroundStart::detach();
    if (!detached) {
      std::fprintf(stderr, "gpulimitd: cannot start in the background: %s\n",
                   detached.error().c_str());
      return 1;
    }
    background = std::move(*detached);
  }
  const auto report_failure = [&](const std::string& message) {
    if (background) {
      background->failed("gpulimitd: " + message);
    } else {
      std::fprintf(stderr, "gpulimitd: %s\n", message.c_str());
    }
    return 1;
  };

  if (auto logging = server::set_up_logging(options.log_file, options.log_level); !logging)
    return report_failure(logging.error());
  // The system server with a policy enforces it: processes that it refuses,
  // or that find it gone, are refused CUDA (limiter-server/README.md). The
  // marker goes up before the socket listens, so that no process meets the
  // server unenforced; one it finds has no policy after all takes it down.
  const bool system_socket = options.server.mode == server::ServerMode::kSystem &&
                             options.server.socket_path == gpulimit::protocol::kSystemSocketPath;
  const bool policy_expected =
      !options.server.policy_path.empty() &&
      (!options.server.policy_optional || access(options.server.policy_path.c_str(), F_OK) == 0);
  std::optional<server::EnforcementMarker> enforcing;
  std::string mark_error;
  const auto mark = [&]() -> bool {
    auto marker = server::EnforcementMarker::make(gpulimit::protocol::kEnforcementMarkerPath);
    if (!marker) {
      mark_error = marker.error();
      return false;
    }
    enforcing.emplace(std::move(*marker));
    return true;
  };
  if (system_socket && policy_expected) mark();  // no /run/gpulimit yet: made after the start

  auto started = server::Server::start(options.server);
  if (!started) {
    // Left as it is: another server may serve the socket, or the policy
    // this one was to enforce has an error.
    if (enforcing) enforcing->leave();
    if (background) spdlog::error("cannot start: {}", started.error());
    return report_failure(started.error());
  }
  if (system_socket && (*started)->has_policy()) {
    if (!enforcing && !mark()) return report_failure(mark_error);
    spdlog::info("enforcing: processes refused or unserved are refused CUDA ({})",
                 gpulimit::protocol::kEnforcementMarkerPath);
  } else if (system_socket) {
    // No policy: a marker that a server with one left when it died goes.
    enforcing.reset();
    unlink(gpulimit::protocol::kEnforcementMarkerPath);
  }
  if (background) background->ready();
  auto ran = (*started)->run();
  if (!ran) {
    spdlog::error("{}", ran.error());
    if (enforcing) enforcing->leave();  // failed, not stopped: still closed
    return 1;
  }
  return 0;
}
