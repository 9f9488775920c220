// gpulimitd's event loop: one thread, one epoll. It watches
//   - the listening socket (new connections),
//   - one connection per tenant process (Hello, Want, Idle, Ack) and per
//     status client (StatusRequest),
//   - a pidfd per tenant process, so an exit is seen at once even when a
//     child inherited the connection; a closed connection counts as an exit,
//   - a timerfd armed for the next deadline (quantum ends, ack timeouts, cap
//     budgets, ledger reap retries, Hello timeouts, idle exit),
//   - a signalfd (SIGTERM, SIGINT; SIGHUP rereads the policy file) and an
//     eventfd for stop(),
//   - with --metrics-address, the eventfd by which a Prometheus scrape asks
//     for a fresh exposition (metrics_endpoint.h).
//   - the BPF watcher's ring buffer (tenant exits, unmanaged opens of GPU
//     nodes) and the driver cross-check's eventfd (watchers.h).
// Who gets the token is TokenScheduler's to say; the Server turns messages
// into its events and its decisions into board writes (server.cpp), and
// admits tenants and sees them leave (admission.cpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/protocol/messages.h"
#include "gpulimit/server/accounting/usage_recorder.h"
#include "gpulimit/server/daemon/listening_socket.h"
#include "gpulimit/server/daemon/server_config.h"
#include "gpulimit/server/loop/connection_limits.h"
#include "gpulimit/server/loop/event_loop.h"
#include "gpulimit/server/loop/ledger_reaper.h"
#include "gpulimit/server/loop/machine_gpus.h"
#include "gpulimit/server/loop/orphans.h"
#include "gpulimit/server/loop/tenant_registry.h"
#include "gpulimit/server/metrics/metrics_endpoint.h"
#include "gpulimit/server/metrics/status_report.h"
#include "gpulimit/server/policy/policy.h"
#include "gpulimit/server/quota/memory_totals.h"
#include "gpulimit/server/result.h"
#include "gpulimit/server/scheduling/handoff_tracker.h"
#include "gpulimit/server/scheduling/token_board.h"
#include "gpulimit/server/scheduling/token_scheduler.h"
#include "gpulimit/server/watcher/watchers.h"

namespace gpulimit::server {

// A connection that has not said Hello (or asked for status) by then is closed.
inline constexpr TimeNs kHelloTimeoutNs = 5'000 * kNsPerMs;
// Messages read from one connection before others get a turn.
inline constexpr int kMessagesPerTurn = 16;
// Connections accepted (or refused) at one readiness of the listening
// socket before the other descriptors get a turn: a flood of connections
// never starves the tenants already joined.
inline constexpr int kAcceptsPerTurn = 64;

class Server {
 public:
  // Listens on the socket and builds the board. Fails with one line (another
  // server on the socket, an unsafe directory, no memfd, ...).
  static Result<std::unique_ptr<Server>> start(const ServerConfig& config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Serves until stopped: a signal, stop(), or the idle exit of user mode.
  // Every token is 0 afterwards. Fails only when the loop itself fails.
  Result<void> run();
  // Makes run() return soon. Safe from any thread and from a signal handler.
  void stop() noexcept;

  const std::string& socket_path() const { return listener_->path(); }
  // Whether an administrator's policy is in force (a file was read).
  bool has_policy() const noexcept { return policy_ != nullptr; }

  // Rereads the policy file (SIGHUP): a good one applies to new tenants and
  // to the shares of running ones; one with an error is refused, logged with
  // its file:line:column, and the policy in force stays. False then.
  bool reload_policy();

  // For the metrics, since the server started: GPU processes seen running
  // without gpulimit (watcher_unmanaged.h), times a tenant's memory drifted
  // from the driver's account, tenant exits the BPF watcher reported first.
  uint64_t unmanaged_processes_seen() const;
  uint64_t driver_drifts_seen() const;
  uint64_t exits_seen_by_watcher() const;

 private:
  // The policy's usage history (its half-life) to the scheduler.
  void apply_fair_share_history(TimeNs now);
  // A LeaseRequest (memory totals): granted or refused, answered in the
  // tenant's lease page.
  void handle_lease_request(ConnectionId id, TenantNumber tenant, DeviceIndex device,
                            uint64_t need);
  struct Connection {
    int fd = -1;
    EventLoop::WatchId watch = 0;
    protocol::PeerCredentials peer;
    enum class Role { kNew, kTenantProcess, kStatusClient } role = Role::kNew;
    int pidfd = -1;
    EventLoop::WatchId pidfd_watch = 0;
    bool warned_stale = false;  // a stale Ack or Idle was logged once
  };
  // A tenant process whose connection closed, until the kernel says it has
  // exited: then its tenant's ledger is reaped.
  struct Departed {
    int pidfd = -1;
    EventLoop::WatchId watch = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<std::string> ledger_paths;
    std::vector<TenantNumber> tenants;  // one per connection it joined with
  };

  Server(const ServerConfig& config, std::unique_ptr<EventLoop> loop,
         std::unique_ptr<ListeningSocket> listener, std::unique_ptr<TokenBoard> board,
         std::unique_ptr<DeadlineTimer> timer);
  Result<void> watch_everything();
  // Serves `endpoint`'s scrapes from the loop (metrics_endpoint.h).
  Result<void> serve_metrics(std::unique_ptr<MetricsEndpoint> endpoint);
  void publish_metrics();

  // The BPF watcher and the driver cross-check (watchers.h).
  Result<void> start_watching(std::unique_ptr<GpuWatcher> watcher);
  // The BPF watcher saw `pid` exit: its connections close. False when it
  // had none.
  bool close_exited_tenant_process(pid_t pid);

  // Connections.
  void accept_connections();
  void connection_ready(ConnectionId id, uint32_t events);
  // Handles one message; false when the connection was closed.
  bool handle_message(ConnectionId id, Connection& connection, const unsigned char* data,
                      std::size_t size);
  bool handle_first_message(ConnectionId id, Connection& connection, const unsigned char* data,
                            std::size_t size);
  bool handle_tenant_message(ConnectionId id, Connection& connection, protocol::Type type,
                             const unsigned char* data);
  void refuse(ConnectionId id, Connection& connection, const std::string& reason);
  // A connection accepted only to be turned away: told why, and closed.
  void turn_away(int fd, const protocol::PeerCredentials& peer, const std::string& reason);
  // Accepts one pending connection on the spare descriptor kept for when
  // all others are in use, turns it away, and opens the spare again; false
  // when there was none.
  bool turn_away_without_descriptors();
  void reply_status(ConnectionId id, Connection& connection);
  // Logs `why` once, with who the peer is, and closes.
  void drop_connection(ConnectionId id, const std::string& why);
  void close_connection(ConnectionId id);
  // "pid P (uid U, tenant T)", for log lines about a connection.
  std::string describe_peer(ConnectionId id) const;

  // Admission and departure (admission.cpp): a Hello checked, clamped to
  // the policy and joined to its tenant, Welcome sent; a process that left
  // gives up its tokens and, once it has exited, has its ledger reaped.
  bool handle_hello(ConnectionId id, Connection& connection, const protocol::Hello& hello);
  void leave_tenant(ConnectionId id, Connection& connection);
  // Withdraws from the board each of `devices` no process sees any more.
  void withdraw_unused(const std::vector<DeviceIndex>& devices, TimeNs now);
  void process_exited(pid_t pid);
  // Orphans (orphans.h): said when a tenant becomes one, ended when due.
  void tenant_orphaned(TenantNumber tenant);
  void kill_orphan(TenantNumber tenant);

  // Scheduling.
  void apply_token_changes(TimeNs now);
  std::string tenant_name(TenantNumber tenant) const;
  void after_events();
  std::optional<TimeNs> next_deadline(TimeNs now) const;
  StatusSnapshot status_snapshot(TimeNs now) const;
  // Samples every tenant into the usage database, and saves (usage_recorder.h).
  void record_usage(TimeNs now);
  void save_usage();

  void shut_down();

  ServerConfig config_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<ListeningSocket> listener_;
  std::unique_ptr<TokenBoard> board_;
  // The GPUs a Hello may name (machine_gpus.h); read at start and on SIGHUP.
  MachineGpus gpus_ = MachineGpus::unknown("not read yet");
  std::unique_ptr<DeadlineTimer> timer_;
  TokenScheduler scheduler_;
  TenantRegistry registry_;
  // The policy in force (null: none) and what each tenant asked for before
  // it, so that a reload can grant it again.
  std::shared_ptr<const Policy> policy_;
  std::unordered_map<TenantNumber, ComputeShare> asked_shares_;
  HandoffTracker handoffs_;
  LedgerReaper reaper_;
  Orphans orphans_;
  MemoryTotals totals_;
  TimeNs next_lease_refusal_log_ = 0;
  TimeNs next_rooms_at_ = 0;  // the next refresh of the totals' rooms
  std::unique_ptr<MetricsEndpoint> metrics_;  // null: no metrics
  std::unique_ptr<UsageRecorder> usage_;      // null: no usage database
  TimeNs next_usage_at_ = 0;
  bool usage_failing_ = false;  // the last save failed (logged once until one succeeds)
  EventLoop::WatchId metrics_watch_ = 0;

  int stop_fd_ = -1;
  int signal_fd_ = -1;
  EventLoop::WatchId listener_watch_ = 0;
  bool accepting_paused_ = false;
  TimeNs accepting_resumes_at_ = kNever;
  bool stopping_ = false;
  std::string stop_reason_;

  // Each uid's connections and departed processes (connection_limits.h).
  UidConnectionCounts per_uid_{kDefaultMaxConnectionsPerUid};
  // Opened at start and given up only to accept a connection to turn away
  // when every other descriptor is taken (EMFILE), so that a full server
  // answers at once instead of leaving clients in the listen queue.
  int spare_fd_ = -1;
  uint64_t turned_away_ = 0;

  ConnectionId next_connection_ = 1;
  std::unordered_map<ConnectionId, Connection> connections_;
  std::unordered_map<pid_t, Departed> departed_;
  // Ids of tenants that left since the last token changes were applied, for
  // the log lines about the tokens they gave up.
  std::unordered_map<TenantNumber, std::string> left_tenants_;
  std::deque<std::pair<TimeNs, ConnectionId>> hello_deadlines_;
  std::vector<unsigned char> buffer_;
  TimeNs started_at_ = 0;
  std::optional<TimeNs> idle_since_;

  std::unique_ptr<Watchers> watchers_;
};

}  // namespace gpulimit::server
