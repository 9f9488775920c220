#include "gpulimit/server/daemon/command_line.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <sstream>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/server/policy/policy_file.h"

namespace gpulimit::server {
namespace {

constexpr int kExitUsage = 2;
constexpr int64_t kMaxQuantumMs = 10'000;
constexpr int64_t kMaxTimeoutMs = 600'000;

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string("/") : path.substr(0, slash);
}

}  // namespace

std::variant<DaemonOptions, CommandLineExit> parse_command_line(int argc, const char* const* argv,
                                                                char* const* envp, uid_t uid) {
  CLI::App app{
      "gpulimitd, the gpulimit token server: gives each tenant (a job and the processes it\n"
      "starts) its share of GPU time. Processes running under libgpulimit.so connect to it\n"
      "once at their first CUDA call; from then on one token per GPU, in shared memory,\n"
      "says which tenant may launch kernels. The memory caps never depend on it.\n",
      "gpulimitd"};
  app.footer(
      "Per-user mode (the default) serves one user, listens on\n"
      "$XDG_RUNTIME_DIR/gpulimit/gpulimitd.sock (or /tmp/gpulimit-UID/gpulimitd.sock) and\n"
      "exits after --idle-exit-s without tenants; the gpulimit command starts it on demand.\n"
      "System mode (--system, run as root, e.g. by gpulimitd.service) serves every user\n"
      "of the machine on /run/gpulimit/gpulimitd.sock and never exits when idle.\n"
      "SIGTERM or SIGINT stop it cleanly: every waiting process is released. SIGHUP rereads\n"
      "the policy file; one with an error is refused and the policy in force stays.\n"
      "Exit status: 0 after a clean stop; 1 when it cannot start or fails; 2 bad options.");

  DaemonOptions options;
  bool system = false;
  std::string socket;
  int64_t quantum_ms = kDefaultQuantumNs / kNsPerMs;
  int64_t ack_timeout_ms = 0;
  int64_t cap_window_ms = kDefaultCapWindowNs / kNsPerMs;
  int64_t idle_exit_s = kDefaultIdleExitNs / kNsPerMs / 1000;
  std::string metrics_address;
  app.add_flag("--system", system, "Serve every user of the machine (run as root)");
  app.add_option("--socket", socket, "Listen on this socket instead of the mode's default path")
      ->type_name("PATH");
  app.add_option("--quantum-ms", quantum_ms,
                 "Time slice a tenant holds a GPU while others wait (default 20)")
      ->type_name("MS")
      ->check(CLI::Range(int64_t{1}, kMaxQuantumMs));
  app.add_option("--ack-timeout-ms", ack_timeout_ms,
                 "How long a revoked tenant may take to drain before the token is taken back "
                 "anyway (default: 5 quanta, at least 100)")
      ->type_name("MS")
      ->check(CLI::Range(int64_t{1}, kMaxTimeoutMs));
  app.add_option("--cap-window-ms", cap_window_ms,
                 "Window of a hard cap (--sm P): a tenant may bank at most P % of it (default 100)")
      ->type_name("MS")
      ->check(CLI::Range(int64_t{1}, kMaxTimeoutMs));
  app.add_option("--idle-exit-s", idle_exit_s,
                 "Per-user mode: exit after this long with no tenant and no connection; 0: never "
                 "(default 30)")
      ->type_name("S")
      ->check(CLI::Range(int64_t{0}, int64_t{86'400 * 365}));
  CLI::Option* metrics_option =
      app.add_option("--metrics-address", metrics_address,
                     std::string("Serve Prometheus metrics at http://HOST:PORT/metrics; \"off\" "
                                 "or \"\" for none (default: ") +
                         kDefaultSystemMetricsAddress +
                         " in system mode, none per user). An address that cannot be listened "
                         "on stops the server from starting")
          ->type_name("HOST:PORT");
  int64_t max_connections_per_uid = kDefaultMaxConnectionsPerUid;
  app.add_option("--max-connections-per-uid", max_connections_per_uid,
                 "The most connections one user may hold; more are turned away at once. Never "
                 "more than a quarter of what the descriptor limit leaves room for (default 1024)")
      ->type_name("N")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  std::string policy;
  app.add_option("--policy", policy,
                 "The administrator's policy file: defaults and maxima per user and group, which "
                 "devices they may use; reread on SIGHUP (default in system mode: "
                 "/etc/gpulimit/policy.toml if it exists; per-user mode: none)")
      ->type_name("PATH");
  std::string usage_db;
  int64_t usage_interval_ms = kDefaultUsageIntervalNs / kNsPerMs;
  app.add_option("--usage-db", usage_db,
                 "Record each tenant's use (user, groups, command, GPU time, memory over time, "
                 "refusals) in this SQLite database, which `gpulimit usage` reads; created if "
                 "missing. One that cannot be written stops the server from starting (default: "
                 "none; the systemd unit names /var/lib/gpulimit/usage.db)")
      ->type_name("PATH");
  app.add_option("--usage-interval-ms", usage_interval_ms,
                 "How often tenants are sampled into the usage database (default 10000)")
      ->type_name("MS")
      ->check(CLI::Range(int64_t{100}, kMaxTimeoutMs));
  std::string watch = "auto";
  std::string unmanaged = "warn";
  int64_t cross_check_ms = kDefaultCrossCheckIntervalNs / kNsPerMs;
  bool pidfd_exits = true;
  app.add_option("--watch", watch,
                 "The BPF watcher (tenant exits, GPU nodes opened without gpulimit): auto loads it "
                 "when it can (root, BTF, tracefs) and says once why not, on fails to start "
                 "without it, off never loads it (default auto)")
      ->type_name("auto|on|off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--unmanaged", unmanaged,
                 "What to do about a GPU process that runs without gpulimit, where the policy "
                 "file says nothing: allow (status only), warn (also logged once), kill (SIGKILL "
                 "to that process) (default warn)")
      ->type_name("allow|warn|kill")
      ->check(CLI::IsMember({"allow", "warn", "kill"}));
  std::string orphans = "warn";
  int64_t orphan_grace_s = OrphanRule{}.grace_s;
  app.add_option("--orphans", orphans,
                 "What to do about a job whose main process has exited while processes of it "
                 "still use the GPU, where the policy file says nothing: warn (shown in status, "
                 "logged), kill (SIGKILL to every process of it after --orphan-grace) "
                 "(default warn)")
      ->type_name("warn|kill")
      ->check(CLI::IsMember({"warn", "kill"}));
  app.add_option("--orphan-grace", orphan_grace_s,
                 "How long an orphaned job may run before --orphans kill ends it, in seconds "
                 "(default 60)")
      ->type_name("SECONDS")
      ->check(CLI::Range(int64_t{0}, int64_t{kMaxOrphanGraceSeconds}));
  app.add_option("--cross-check-ms", cross_check_ms,
                 "How often the driver's per-process GPU memory (NVML) is compared with the "
                 "ledgers; 0: never (default 2000)")
      ->type_name("MS")
      ->check(CLI::Range(int64_t{0}, kMaxTimeoutMs));
  // For tests of the watcher: tenant exits from its exit events alone.
  app.add_option("--pidfd-exits", pidfd_exits)->group("")->type_name("BOOL");
  app.add_flag("--foreground", options.foreground,
               "Stay in the foreground and log to stderr (for systemd and debugging); otherwise "
               "detach once serving and log to --log-file");
  app.add_option("--log-file", options.log_file,
                 "Where to log in the background (default: gpulimitd.log beside the socket; "
                 "/var/log/gpulimitd.log in system mode)")
      ->type_name("PATH");
  app.add_option("--log-level", options.log_level,
                 "trace, debug, info, warn or error (default info)")
      ->type_name("LEVEL")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));

  // A later option overrides an earlier one, as in most daemons: scripts
  // append what they need to a default command line.
  for (CLI::Option* option : app.get_options())
    if (option->get_name() != "--help")
      option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::ostringstream out;
    std::ostringstream err;
    const int status = app.exit(error, out, err);
    if (status == static_cast<int>(CLI::ExitCodes::Success)) return CommandLineExit{0, out.str()};
    return CommandLineExit{kExitUsage, "gpulimitd: " + std::string(error.what()) + "\n", true};
  }

  ServerConfig& server = options.server;
  server.mode = system ? ServerMode::kSystem : ServerMode::kUser;
  server.own_socket_directory = socket.empty();
  server.socket_path = !socket.empty() ? socket
                       : system        ? std::string(protocol::kSystemSocketPath)
                                       : protocol::user_socket_path(envp, uid);
  server.scheduler.quantum_ns = quantum_ms * kNsPerMs;
  server.scheduler.ack_timeout_ns =
      ack_timeout_ms > 0 ? ack_timeout_ms * kNsPerMs : default_ack_timeout(quantum_ms * kNsPerMs);
  server.scheduler.cap_window_ns = cap_window_ms * kNsPerMs;
  server.idle_exit_ns = system ? 0 : idle_exit_s * 1000 * kNsPerMs;
  server.max_connections_per_uid = static_cast<uint32_t>(max_connections_per_uid);
  // Absolute: a reload reads it again, after the daemon may have changed
  // its directory.
  if (!policy.empty() && policy.front() != '/') {
    std::error_code ignored;
    policy = std::filesystem::absolute(policy, ignored).string();
  }
  server.policy_path = !policy.empty() ? policy
                       : system        ? std::string(kSystemPolicyPath)
                                       : std::string();
  server.policy_optional = policy.empty();
  if (!usage_db.empty() && usage_db.front() != '/') {
    std::error_code ignored;
    usage_db = std::filesystem::absolute(usage_db, ignored).string();
  }
  server.usage_database = usage_db;
  server.usage_interval_ns = usage_interval_ms * kNsPerMs;
  server.watcher.mode = *parse_watch_mode(watch);
  server.watcher.unmanaged_default = *parse_unmanaged_action(unmanaged);
  server.watcher.cross_check_interval_ns = cross_check_ms * kNsPerMs;
  server.watcher.pidfd_exits = pidfd_exits;
  server.orphans.action = orphans == "kill" ? OrphanAction::kKill : OrphanAction::kWarn;
  server.orphans.grace_s = static_cast<uint32_t>(orphan_grace_s);
  if (metrics_option->count() == 0 && system) metrics_address = kDefaultSystemMetricsAddress;
  if (!metrics_turned_off(metrics_address)) {
    Result<MetricsAddress> address = parse_metrics_address(metrics_address);
    if (!address) return CommandLineExit{kExitUsage, "gpulimitd: " + address.error() + "\n", true};
    server.metrics = *address;
  }
  if (options.foreground) {
    options.log_file.clear();
  } else if (options.log_file.empty()) {
    options.log_file = system ? std::string("/var/log/gpulimitd.log")
                              : directory_of(server.socket_path) + "/gpulimitd.log";
  }
  return options;
}

}  // namespace gpulimit::server
