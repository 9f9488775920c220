// How one gpulimitd runs: its mode, socket and scheduling settings.
#pragma once

#include <string>

#include "gpulimit/server/scheduling_types.h"
#include "gpulimit/server/token_scheduler.h"

namespace gpulimit::server {

enum class ServerMode {
  kUser,    // one user's server, started on demand; exits when idle
  kSystem,  // one server for every user of the machine, as a service
};

inline constexpr TimeNs kDefaultIdleExitNs = 30'000 * kNsPerMs;

struct ServerConfig {
  ServerMode mode = ServerMode::kUser;
  std::string socket_path;
  // The socket's directory is the server's own (the default paths), which it
  // keeps private; false for a --socket the user chose.
  bool own_socket_directory = true;
  SchedulerSettings scheduler;
  // User mode: exit after this long with no tenant and no connection. 0: never.
  TimeNs idle_exit_ns = kDefaultIdleExitNs;
  // Stop on SIGTERM and SIGINT (through a signalfd); off for servers run
  // inside a test or benchmark thread.
  bool handle_signals = true;
};

inline const char* mode_name(ServerMode mode) {
  return mode == ServerMode::kSystem ? "system" : "user";
}

}  // namespace gpulimit::server
