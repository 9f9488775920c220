// How one gpulimitd runs: its mode, socket and scheduling settings.
#pragma once

#include <optional>
#include <string>

#include "gpulimit/server/loop/connection_limits.h"
#include "gpulimit/server/metrics/metrics_address.h"
#include "gpulimit/server/policy/policy.h"
#include "gpulimit/server/scheduling/scheduling_types.h"
#include "gpulimit/server/scheduling/token_scheduler.h"
#include "gpulimit/server/watcher/watcher_config.h"

namespace gpulimit::server {

enum class ServerMode {
  kUser,    // one user's server, started on demand; exits when idle
  kSystem,  // one server for every user of the machine, as a service
};

inline constexpr TimeNs kDefaultIdleExitNs = 30'000 * kNsPerMs;
inline constexpr TimeNs kDefaultUsageIntervalNs = 10'000 * kNsPerMs;

struct ServerConfig {
  ServerMode mode = ServerMode::kUser;
  std::string socket_path;
  // The socket's directory is the server's own (the default paths), which it
  // keeps private; false for a --socket the user chose.
  bool own_socket_directory = true;
  SchedulerSettings scheduler;
  // Where to serve Prometheus metrics; none: no metrics.
  std::optional<MetricsAddress> metrics;
  // User mode: exit after this long with no tenant and no connection. 0: never.
  TimeNs idle_exit_ns = kDefaultIdleExitNs;
  // The administrator's policy file (policy_file.h); empty: none. Read at
  // start (an error there stops the server) and again on SIGHUP.
  std::string policy_path;
  // The path is the default of system mode, not one the administrator
  // named: a missing file there means no policy, not an error.
  bool policy_optional = false;
  // The most connections one uid may hold at once (connection_limits.h);
  // never more than a quarter of what the descriptor limit leaves room for.
  uint32_t max_connections_per_uid = kDefaultMaxConnectionsPerUid;
  // The usage database (gpulimit/usage/usage_database.h) to record each
  // tenant's use into; empty: none. Sampled every usage_interval_ns.
  std::string usage_database;
  TimeNs usage_interval_ns = kDefaultUsageIntervalNs;
  // The BPF watcher, unmanaged GPU processes, the driver cross-check.
  WatcherConfig watcher;
  // What to do about an orphaned job (loop/orphans.h) where the policy file
  // says nothing: --orphans, --orphan-grace.
  OrphanRule orphans;
  // Stop on SIGTERM and SIGINT (through a signalfd); off for servers run
  // inside a test or benchmark thread.
  bool handle_signals = true;
};

inline const char* mode_name(ServerMode mode) {
  return mode == ServerMode::kSystem ? "system" : "user";
}

}  // namespace gpulimit::server
