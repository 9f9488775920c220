// The Server's loop and dispatch: what each readable descriptor means, each
// message handed to the one who handles it, the scheduler's decisions
// written to the board, the status answered. Admission and departure are
// in admission.cpp, what the watchers report in watchers.cpp.
#include "gpulimit/server/loop/server.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "gpulimit/server/loop/hello_validation.h"
#include "gpulimit/server/metrics/metrics_exposition.h"
#include "gpulimit/server/policy/limits_policy.h"
#include "gpulimit/server/policy/policy_file.h"
#include "gpulimit/server/policy/user_accounts.h"
#include "gpulimit/shm/ledger_inspection.h"

namespace gpulimit::server {
namespace {

constexpr uint32_t kReadable = EPOLLIN;
// A refused accept (out of descriptors) is retried after this long.
constexpr TimeNs kAcceptPauseNs = 100 * kNsPerMs;

const char* release_reason(TokenChange::Reason reason) {
  switch (reason) {
    case TokenChange::Reason::kQuantumEnd:
      return "quantum end";
    case TokenChange::Reason::kCapSpent:
      return "hard cap spent";
    case TokenChange::Reason::kIdle:
      return "idle";
    case TokenChange::Reason::kDrained:
      return "drained";
    case TokenChange::Reason::kAckTimeout:
      return "ack timeout";
    case TokenChange::Reason::kHolderLeft:
      return "holder left";
    case TokenChange::Reason::kNone:
      break;
  }
  return "";
}

template <typename Message>
Message read_as(const unsigned char* data) {
  Message message;
  std::memcpy(&message, data, sizeof message);
  return message;
}

}  // namespace

Result<std::unique_ptr<Server>> Server::start(const ServerConfig& config) {
  // As many descriptors as the administrator allows, before any is opened.
  const uint64_t descriptor_limit = raise_descriptor_limit();
  // First: a policy file with an error stops the server before it serves.
  Result<LoadedPolicy> policy =
      load_server_policy(config.policy_path, config.policy_optional, system_lookups());
  if (!policy) return fail(policy.error());
  // So is a usage database that cannot be written: left as it was.
  std::unique_ptr<UsageRecorder> usage;
  if (!config.usage_database.empty()) {
    std::string error;
    std::unique_ptr<usage::UsageDatabase> database =
        usage::UsageDatabase::open_for_writing(config.usage_database, error);
    if (!database) return fail(error);
    const int64_t run = wall_clock_ns();
    const int lost = database->close_unfinished(run, error);
    if (lost < 0) return fail(error);
    if (lost > 0)
      spdlog::warn("usage: {} tenant(s) of an earlier run were still open in {}: closed as lost",
                   lost, config.usage_database);
    spdlog::info("usage recorded in {} every {} ms", config.usage_database,
                 config.usage_interval_ns / kNsPerMs);
    usage = std::make_unique<UsageRecorder>(std::move(database), run, [](uint32_t uid) {
      return group_names(static_cast<uid_t>(uid));
    });
  }
  Result<std::unique_ptr<EventLoop>> loop = EventLoop::create();
  if (!loop) return fail(loop.error());
  Result<std::unique_ptr<DeadlineTimer>> timer = DeadlineTimer::create();
  if (!timer) return fail(timer.error());
  const auto quantum_us = static_cast<uint32_t>(config.scheduler.quantum_ns / 1000);
  Result<std::unique_ptr<TokenBoard>> board = TokenBoard::create(quantum_us);
  if (!board) return fail(board.error());
  // Attached before the socket exists: a process that can connect is watched.
  std::string no_watcher;
  Result<std::unique_ptr<GpuWatcher>> watcher = open_watcher(config.watcher, &no_watcher);
  if (!watcher) return fail(watcher.error());
  // Before the socket exists: whatever follows it (the enforcement marker
  // of main.cpp) is there soon after a client can connect.
  MachineGpus gpus = MachineGpus::from_nvml();
  Result<std::unique_ptr<ListeningSocket>> listener =
      ListeningSocket::open(config.socket_path, config.mode, config.own_socket_directory);
  if (!listener) return fail(listener.error());
  if (!no_watcher.empty()) spdlog::info("running without the BPF watcher: {}", no_watcher);
  std::unique_ptr<Server> server(new Server(config, std::move(*loop), std::move(*listener),
                                            std::move(*board), std::move(*timer)));
  server->per_uid_ =
      UidConnectionCounts(connections_per_uid(config.max_connections_per_uid, descriptor_limit));
  spdlog::info("each user may hold {} connections (descriptor limit {})", server->per_uid_.limit(),
               descriptor_limit);
  server->spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  server->usage_ = std::move(usage);
  server->gpus_ = std::move(gpus);
  if (server->gpus_.known() || config.mode == ServerMode::kUser) {
    spdlog::info("{}", server->gpus_.describe(config.mode));
  } else {
    spdlog::warn("{}", server->gpus_.describe(config.mode));
  }
  if (Result<void> watched = server->watch_everything(); !watched) return fail(watched.error());
  if (Result<void> watching = server->start_watching(std::move(*watcher)); !watching)
    return fail(watching.error());
  for (const std::string& warning : policy->warnings)
    spdlog::warn("policy: {}", warning);
  server->policy_ = policy->policy;
  if (server->policy_) spdlog::info("policy from {}", config.policy_path);
  server->apply_fair_share_history(EventLoop::now());
  if (config.metrics) {
    Result<std::unique_ptr<MetricsEndpoint>> metrics = MetricsEndpoint::start(*config.metrics);
    if (!metrics) return fail(metrics.error());
    if (Result<void> served = server->serve_metrics(std::move(*metrics)); !served)
      return fail(served.error());
  }
  return server;
}

Server::Server(const ServerConfig& config, std::unique_ptr<EventLoop> loop,
               std::unique_ptr<ListeningSocket> listener, std::unique_ptr<TokenBoard> board,
               std::unique_ptr<DeadlineTimer> timer)
    : config_(config),
      loop_(std::move(loop)),
      listener_(std::move(listener)),
      board_(std::move(board)),
      timer_(std::move(timer)),
      scheduler_(config.scheduler),
      reaper_(*loop_),
      orphans_(*loop_, [this](TenantNumber tenant) { tenant_orphaned(tenant); }),
      buffer_(protocol::kMaxMessageSize),
      started_at_(EventLoop::now()) {}

Server::~Server() {
  for (auto& [id, connection] : connections_) {
    ::close(connection.fd);
    if (connection.pidfd >= 0) ::close(connection.pidfd);
  }
  for (auto& [pid, departed] : departed_)
    ::close(departed.pidfd);
  if (stop_fd_ >= 0) ::close(stop_fd_);
  if (signal_fd_ >= 0) ::close(signal_fd_);
  if (spare_fd_ >= 0) ::close(spare_fd_);
}

Result<void> Server::watch_everything() {
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd_ < 0) return fail(std::string("eventfd: ") + std::strerror(errno));
  Result<EventLoop::WatchId> watched = loop_->watch(stop_fd_, kReadable, [this](uint32_t) {
    stopping_ = true;
    if (stop_reason_.empty()) stop_reason_ = "asked to stop";
  });
  if (!watched) return fail(watched.error());

  if (config_.handle_signals) {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);  // reread the policy file
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    signal_fd_ = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
    if (signal_fd_ < 0) return fail(std::string("signalfd: ") + std::strerror(errno));
    watched = loop_->watch(signal_fd_, kReadable, [this](uint32_t) {
      signalfd_siginfo info{};
      if (::read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        if (info.ssi_signo == SIGHUP) {
          reload_policy();
          return;
        }
        stopping_ = true;
        stop_reason_ = std::string(strsignal(static_cast<int>(info.ssi_signo)));
      }
    });
    if (!watched) return fail(watched.error());
  }

  watched = loop_->watch(timer_->fd(), kReadable, [this](uint32_t) { timer_->acknowledge(); });
  if (!watched) return fail(watched.error());
  watched = loop_->watch(listener_->fd(), kReadable, [this](uint32_t) { accept_connections(); });
  if (!watched) return fail(watched.error());
  listener_watch_ = *watched;
  return {};
}

Result<void> Server::serve_metrics(std::unique_ptr<MetricsEndpoint> endpoint) {
  metrics_ = std::move(endpoint);
  Result<EventLoop::WatchId> watched =
      loop_->watch(metrics_->refresh_fd(), kReadable, [this](uint32_t) {
        metrics_->acknowledge_refresh();
        publish_metrics();
      });
  if (!watched) return fail(watched.error());
  metrics_watch_ = *watched;
  publish_metrics();
  return {};
}

void Server::publish_metrics() {
  metrics_->publish(render_metrics(status_snapshot(EventLoop::now()), GPULIMIT_VERSION));
}

void Server::apply_fair_share_history(TimeNs now) {
  const uint32_t half_life_s = policy_ ? policy_->usage_half_life_s : 0;
  const TimeNs half_life_ns = TimeNs{half_life_s} * 1'000'000'000;
  if (half_life_ns == scheduler_.settings().usage_half_life_ns) return;
  scheduler_.set_usage_half_life(half_life_ns, now);
  if (half_life_s > 0) {
    spdlog::info("fair share keeps a usage history with a half-life of {} s", half_life_s);
  } else {
    spdlog::info("fair share keeps no usage history");
  }
}

bool Server::reload_policy() {
  if (config_.policy_path.empty()) {
    spdlog::warn(
        "SIGHUP: there is no policy file to read again (gpulimitd --policy PATH names one)");
    return false;
  }
  Result<LoadedPolicy> loaded =
      load_server_policy(config_.policy_path, config_.policy_optional, system_lookups());
  if (!loaded) {
    spdlog::error("policy not reloaded; the one in force stays: {}", loaded.error());
    return false;
  }
  for (const std::string& warning : loaded->warnings)
    spdlog::warn("policy: {}", warning);
  policy_ = loaded->policy;
  // GPUs come and go with the driver (a reset, a hot-plug): the view is
  // read again, and kept when it cannot be.
  if (MachineGpus gpus = MachineGpus::from_nvml(); gpus.known() || !gpus_.known()) {
    if (gpus.uuids() != gpus_.uuids() || gpus.known() != gpus_.known())
      spdlog::info("{}", gpus.describe(config_.mode));
    gpus_ = std::move(gpus);
  }
  if (policy_) {
    spdlog::info("policy reloaded from {}", config_.policy_path);
  } else {
    spdlog::info("no policy file at {}; requests are granted as asked", config_.policy_path);
  }
  // Running tenants get their shares again under the new policy; memory
  // caps stay as their ledgers hold them; totals change at once.
  const TimeNs now = EventLoop::now();
  apply_fair_share_history(now);
  for (const std::string& change : totals_.apply_policy(policy_.get()))
    spdlog::info("policy: {}", change);
  for (const auto& [number, tenant] : registry_.tenants()) {
    const ShareBranch branch = share_branch(policy_.get(), tenant.uid, tenant.gid);
    if (branch != tenant.branch) {
      spdlog::info("tenant {}: the policy now gives its group {} share {}, its user {} share {}",
                   tenant.id, tenant.gid, branch.group_share, tenant.user, branch.user_share);
      scheduler_.change_branch(number, branch, now);
      registry_.set_branch(number, branch);
    }
    const auto asked = asked_shares_.find(number);
    if (asked == asked_shares_.end()) continue;
    std::vector<GpuUuid> uuids;
    for (const DeviceIndex device : registry_.devices_of(number))
      uuids.push_back(board_->uuid(device));
    const ComputeShare share =
        clamp_share(policy_.get(), identify(tenant.uid, tenant.gid), asked->second, uuids);
    if (share == tenant.share) continue;
    spdlog::info(
        "tenant {}: the policy now grants sm {}, weight {}, priority {}", tenant.id,
        share.sm_percent ? std::to_string(share.sm_percent) + " %" : std::string("uncapped"),
        share.weight, priority_name(share.priority));
    scheduler_.change_share(number, share, now);
    registry_.set_share(number, share);
  }
  return true;
}

Result<void> Server::start_watching(std::unique_ptr<GpuWatcher> watcher) {
  // A per-user server answers for its own user's processes only: another
  // user's gpulimit jobs are another server's tenants.
  const std::optional<uid_t> only_uid =
      config_.mode == ServerMode::kUser ? std::optional<uid_t>(::geteuid()) : std::nullopt;
  // Unless a test gave its own lookup: the policy file's answer for the
  // process's user and groups, read at each sighting (SIGHUP replaces the
  // policy), else --unmanaged.
  WatcherConfig watch = config_.watcher;
  if (!watch.unmanaged_policy)
    watch.unmanaged_policy = [this](uid_t uid, gid_t gid) {
      const UnmanagedAction otherwise = config_.watcher.unmanaged_default;
      return policy_ ? policy_->unmanaged_action(uid, gid, otherwise) : otherwise;
    };
  Result<std::unique_ptr<Watchers>> watchers = Watchers::start(
      watch, only_uid, *loop_, registry_,
      [this](pid_t pid) { return close_exited_tenant_process(pid); }, std::move(watcher));
  if (!watchers) return fail(watchers.error());
  watchers_ = std::move(*watchers);
  return {};
}

bool Server::close_exited_tenant_process(pid_t pid) {
  std::vector<ConnectionId> gone;
  for (const auto& [id, connection] : connections_)
    if (connection.role == Connection::Role::kTenantProcess && connection.peer.pid == pid)
      gone.push_back(id);
  for (const ConnectionId id : gone) {
    spdlog::debug("{} exited (reported by the BPF exit event)", describe_peer(id));
    close_connection(id);
  }
  return !gone.empty();
}

uint64_t Server::unmanaged_processes_seen() const {
  return watchers_ ? watchers_->unmanaged_processes_seen() : 0;
}

uint64_t Server::driver_drifts_seen() const {
  return watchers_ ? watchers_->driver_drifts_seen() : 0;
}

uint64_t Server::exits_seen_by_watcher() const {
  return watchers_ ? watchers_->exits_seen_by_watcher() : 0;
}

void Server::stop() noexcept {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(stop_fd_, &one, sizeof one);
}

Result<void> Server::run() {
  spdlog::info("serving on {} ({} mode, quantum {} us, ack timeout {} ms, protocol {})",
               socket_path(), mode_name(config_.mode), config_.scheduler.quantum_ns / 1000,
               config_.scheduler.ack_timeout_ns / kNsPerMs, protocol::kVersion);
  if (metrics_) spdlog::info("Prometheus metrics on http://{}/metrics", metrics_->address().text());
  after_events();
  while (!stopping_) {
    if (Result<void> ran = loop_->run_once(); !ran) {
      shut_down();
      return fail("event loop: " + ran.error());
    }
    after_events();
  }
  spdlog::info("stopping: {}", stop_reason_);
  shut_down();
  return {};
}

void Server::shut_down() {
  // Every token to 0 and its waiters woken; the connections' close tells
  // each client the server is gone.
  board_->clear_all();
  if (usage_) {
    const TimeNs now = EventLoop::now();
    usage_->observe(status_snapshot(now).report, now, wall_clock_ns());
    usage_->end_all(usage::kEndedStopped, wall_clock_ns());
    save_usage();
  }
  // Scrapes end with the server: its threads are joined here.
  if (metrics_) {
    loop_->unwatch(metrics_watch_);
    metrics_.reset();
  }
  for (auto& [id, connection] : connections_) {
    loop_->unwatch(connection.watch);
    ::close(connection.fd);
    connection.fd = -1;
    if (connection.pidfd >= 0) {
      loop_->unwatch(connection.pidfd_watch);
      ::close(connection.pidfd);
      connection.pidfd = -1;
    }
  }
  connections_.clear();
}

// ---------------------------------------------------------------------------
// Connections

void Server::accept_connections() {
  const TimeNs now = EventLoop::now();
  for (int turn = 0; turn < kAcceptsPerTurn; ++turn) {
    const int fd = ::accept4(listener_->fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: the one kept spare answers the next client at
        // once, rather than leave it waiting in the queue.
        if (turn_away_without_descriptors()) continue;
      }
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop listening a moment rather than spin.
        spdlog::warn("cannot accept a connection: {}; pausing for {} ms", std::strerror(errno),
                     kAcceptPauseNs / kNsPerMs);
        loop_->change(listener_watch_, 0);
        accepting_paused_ = true;
        accepting_resumes_at_ = now + kAcceptPauseNs;
      }
      return;
    }
    Connection connection;
    connection.fd = fd;
    if (!protocol::peer_credentials(fd, connection.peer)) {
      spdlog::warn("closing a connection whose peer credentials cannot be read: {}",
                   std::strerror(errno));
      ::close(fd);
      continue;
    }
    if (!per_uid_.admit(connection.peer.uid)) {
      turn_away(fd, connection.peer,
                "uid " + std::to_string(connection.peer.uid) + " holds " +
                    std::to_string(per_uid_.limit()) +
                    " connections to gpulimitd already, the most one user may hold "
                    "(gpulimitd --max-connections-per-uid)");
      continue;
    }
    const ConnectionId id = next_connection_++;
    Result<EventLoop::WatchId> watched =
        loop_->watch(fd, kReadable, [this, id](uint32_t events) { connection_ready(id, events); });
    if (!watched) {
      spdlog::warn("closing a connection of pid {}: {}", connection.peer.pid, watched.error());
      per_uid_.release(connection.peer.uid);
      ::close(fd);
      continue;
    }
    connection.watch = *watched;
    connections_.emplace(id, connection);
    hello_deadlines_.emplace_back(now + kHelloTimeoutNs, id);
    idle_since_.reset();
  }
}

void Server::turn_away(int fd, const protocol::PeerCredentials& peer, const std::string& reason) {
  // Said once per burst: a flood would fill the log otherwise.
  const uint64_t count = ++turned_away_;
  if ((count & (count - 1)) == 0)  // the 1st, 2nd, 4th, 8th, ...
    spdlog::warn("turned away pid {} (uid {}): {} ({} turned away so far)", peer.pid, peer.uid,
                 reason, count);
  protocol::Refused refused = protocol::make<protocol::Refused>();
  std::strncpy(refused.reason, reason.c_str(), sizeof refused.reason - 1);
  // What the client sent already (its Hello, as a rule) is read first: a
  // socket closed with unread data resets its peer, which would then lose
  // the Refused and see only a reset connection.
  const auto drain = [fd] {
    unsigned char unread[256];
    for (int i = 0; i < 4 && ::recv(fd, unread, sizeof unread, MSG_DONTWAIT) > 0; ++i) {
    }
  };
  drain();
  protocol::send_message(fd, &refused, sizeof refused);
  drain();
  ::close(fd);
}

bool Server::turn_away_without_descriptors() {
  if (spare_fd_ < 0) return false;
  ::close(spare_fd_);
  spare_fd_ = -1;
  const int fd = ::accept4(listener_->fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  bool turned = false;
  if (fd >= 0) {
    protocol::PeerCredentials peer;
    if (!protocol::peer_credentials(fd, peer)) peer = {};
    turn_away(fd, peer,
              "gpulimitd has no descriptor left for another connection (" +
                  std::to_string(connections_.size()) + " open)");
    turned = true;
  }
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  errno = turned ? 0 : EMFILE;
  return turned;
}

std::string Server::describe_peer(ConnectionId id) const {
  const auto found = connections_.find(id);
  if (found == connections_.end()) return "connection " + std::to_string(id);
  const protocol::PeerCredentials& peer = found->second.peer;
  std::string text = "pid " + std::to_string(peer.pid) + " (uid " + std::to_string(peer.uid);
  if (const ProcessRecord* process = registry_.process(id))
    if (const TenantRecord* tenant = registry_.tenant(process->tenant))
      text += ", tenant " + tenant->id;
  return text + ")";
}

void Server::connection_ready(ConnectionId id, uint32_t events) {
  for (int turn = 0; turn < kMessagesPerTurn; ++turn) {
    const auto found = connections_.find(id);
    if (found == connections_.end()) return;
    Connection& connection = found->second;
    const ssize_t got =
        protocol::receive_message(connection.fd, buffer_.data(), buffer_.size(), nullptr);
    if (got > 0) {
      if (!handle_message(id, connection, buffer_.data(), static_cast<std::size_t>(got))) return;
      continue;
    }
    if (got == 0) {
      spdlog::debug("{} closed its connection", describe_peer(id));
      close_connection(id);
      return;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (events & (EPOLLHUP | EPOLLERR)) close_connection(id);
      return;
    }
    if (errno == EMSGSIZE) {
      drop_connection(
          id, "sent a message larger than " + std::to_string(protocol::kMaxMessageSize) + " bytes");
    } else {
      drop_connection(id, std::string("connection failed: ") + std::strerror(errno));
    }
    return;
  }
}

bool Server::handle_message(ConnectionId id, Connection& connection, const unsigned char* data,
                            std::size_t size) {
  const protocol::Problem problem = protocol::check(data, size);
  if (problem == protocol::Problem::kOtherVersion) {
    protocol::Header header;
    std::memcpy(&header, data, sizeof header);
    refuse(id, connection, other_version_refusal(header.version));
    return false;
  }
  if (problem != protocol::Problem::kNone) {
    drop_connection(id, std::string("sent a ") + protocol::describe(problem) + " (" +
                            std::to_string(size) + " bytes)");
    return false;
  }
  if (connection.role == Connection::Role::kNew)
    return handle_first_message(id, connection, data, size);
  protocol::Header header;
  std::memcpy(&header, data, sizeof header);
  if (header.type == protocol::Type::kStatusRequest) {
    reply_status(id, connection);
    return connections_.contains(id);
  }
  if (connection.role == Connection::Role::kStatusClient) {
    drop_connection(id, "sent a message other than StatusRequest on a status connection");
    return false;
  }
  return handle_tenant_message(id, connection, header.type, data);
}

bool Server::handle_first_message(ConnectionId id, Connection& connection,
                                  const unsigned char* data, std::size_t /*size*/) {
  protocol::Header header;
  std::memcpy(&header, data, sizeof header);
  if (header.type == protocol::Type::kStatusRequest) {
    connection.role = Connection::Role::kStatusClient;
    reply_status(id, connection);
    return connections_.contains(id);
  }
  if (header.type != protocol::Type::kHello) {
    drop_connection(id, "sent a message before Hello");
    return false;
  }
  return handle_hello(id, connection, read_as<protocol::Hello>(data));
}

bool Server::handle_tenant_message(ConnectionId id, Connection& connection, protocol::Type type,
                                   const unsigned char* data) {
  const TimeNs now = EventLoop::now();
  ProcessRecord* process = registry_.process(id);
  if (!process) {
    drop_connection(id, "sent a message for no tenant");
    return false;
  }
  const TenantNumber tenant = process->tenant;
  DeviceIndex device = 0;
  uint32_t grant = 0;
  uint64_t need = 0;
  switch (type) {
    case protocol::Type::kWant:
      device = read_as<protocol::Want>(data).board_device;
      break;
    case protocol::Type::kIdle: {
      const auto idle = read_as<protocol::Idle>(data);
      device = idle.board_device;
      grant = idle.grant;
      break;
    }
    case protocol::Type::kAck: {
      const auto ack = read_as<protocol::Ack>(data);
      device = ack.board_device;
      grant = ack.grant;
      break;
    }
    case protocol::Type::kLeaseRequest: {
      const auto request = read_as<protocol::LeaseRequest>(data);
      device = request.board_device;
      need = request.need;
      break;
    }
    case protocol::Type::kHello:
      drop_connection(id, "sent a second Hello");
      return false;
    default:
      drop_connection(id, "sent a message only the server sends");
      return false;
  }
  if (!process->sees(device)) {
    drop_connection(id,
                    "named board device " + std::to_string(device) + ", which its Hello did not");
    return false;
  }

  if (type == protocol::Type::kLeaseRequest) {
    handle_lease_request(id, tenant, device, need);
    return true;
  }

  HandoffTracker::Verdict verdict = HandoffTracker::Verdict::kNoted;
  if (type == protocol::Type::kWant) {
    process->wants.set(device);
    scheduler_.set_wanting(tenant, device, true, now);
  } else if (type == protocol::Type::kIdle) {
    verdict = handoffs_.idle(device, tenant, id, grant, registry_.processes_seeing(tenant, device));
    if (verdict == HandoffTracker::Verdict::kComplete) scheduler_.holder_idle(tenant, device, now);
  } else {
    verdict = handoffs_.ack(device, tenant, id, grant);
    if (verdict == HandoffTracker::Verdict::kComplete)
      scheduler_.holder_drained(tenant, device, now);
    else if (verdict == HandoffTracker::Verdict::kLateDrained)
      scheduler_.late_drained(tenant, device, now);
  }
  if (verdict == HandoffTracker::Verdict::kStale && !connection.warned_stale) {
    // An Ack for no grant owed (a late Ack is counted above) or an Idle
    // that crossed a revoke: harmless, and dropped; said once per
    // connection.
    connection.warned_stale = true;
    spdlog::info("{} sent {} for grant {} of device {}, which is not current; dropped (said once)",
                 describe_peer(id), type == protocol::Type::kAck ? "an Ack" : "an Idle", grant,
                 device);
  }
  return true;
}

void Server::handle_lease_request(ConnectionId id, TenantNumber tenant, DeviceIndex device,
                                  uint64_t need) {
  if (!totals_.bound(tenant)) {
    // Nothing to answer: it has no lease page, so none of its processes
    // waits on one. (A bound tenant is always answered: on a device a
    // reload unbound, with no limit.)
    spdlog::debug("{} asked for a lease on device {}, but no total binds its tenant; ignored",
                  describe_peer(id), device);
    return;
  }
  const std::optional<uint64_t> granted = totals_.request(tenant, device, need);
  const TenantRecord* record = registry_.tenant(tenant);
  const std::string name = record ? record->id : std::to_string(tenant);
  if (granted) {
    spdlog::debug("tenant {}: leased {} on device {} (it needs {})", name, format_size(*granted),
                  device, format_size(need));
  } else {
    // At most one line a second: a job that meets its total retries.
    const TimeNs now = EventLoop::now();
    if (now >= next_lease_refusal_log_) {
      next_lease_refusal_log_ = now + 1000 * kNsPerMs;
      spdlog::info(
          "tenant {}: refused {} on device {}: its group's or user's memory_total has no room",
          name, format_size(need), device);
    }
  }
}

void Server::refuse(ConnectionId id, Connection& connection, const std::string& reason) {
  spdlog::warn("refused {}: {}", describe_peer(id), reason);
  protocol::Refused refused = protocol::make<protocol::Refused>();
  std::strncpy(refused.reason, reason.c_str(), sizeof refused.reason - 1);
  protocol::send_message(connection.fd, &refused, sizeof refused);
  close_connection(id);
}

void Server::reply_status(ConnectionId id, Connection& connection) {
  const TimeNs now = EventLoop::now();
  if (watchers_) watchers_->forget_gone();
  const StatusSnapshot snapshot = status_snapshot(now);
  std::size_t left_out = 0;
  const std::string body = render_status(
      snapshot.report, protocol::kMaxMessageSize - sizeof(protocol::StatusReply), left_out);
  if (left_out > 0) spdlog::warn("status: {} tenants left out to fit in one message", left_out);
  std::vector<unsigned char> reply(sizeof(protocol::StatusReply) + body.size());
  const protocol::Header header{protocol::kMagic, protocol::kVersion, protocol::Type::kStatusReply,
                                static_cast<uint32_t>(reply.size()), 0};
  std::memcpy(reply.data(), &header, sizeof header);
  std::memcpy(reply.data() + sizeof header, body.data(), body.size());
  // One datagram must fit in the send buffer; the default may be smaller.
  const int wanted = static_cast<int>(reply.size() + 4096);
  int current = 0;
  socklen_t length = sizeof current;
  if (getsockopt(connection.fd, SOL_SOCKET, SO_SNDBUF, &current, &length) == 0 && current < wanted)
    setsockopt(connection.fd, SOL_SOCKET, SO_SNDBUF, &wanted, sizeof wanted);
  if (!protocol::send_message(connection.fd, reply.data(), reply.size())) {
    drop_connection(id, std::string("cannot be sent its status: ") + std::strerror(errno));
    return;
  }
  spdlog::debug("status sent to {} ({} bytes)", describe_peer(id), reply.size());
}

void Server::drop_connection(ConnectionId id, const std::string& why) {
  const auto found = connections_.find(id);
  if (found == connections_.end()) return;
  spdlog::warn("{} {}; closing its connection", describe_peer(id), why);
  close_connection(id);
}

void Server::close_connection(ConnectionId id) {
  const auto found = connections_.find(id);
  if (found == connections_.end()) return;
  Connection connection = found->second;
  loop_->unwatch(connection.watch);
  ::close(connection.fd);
  if (connection.pidfd_watch) loop_->unwatch(connection.pidfd_watch);
  if (connection.role == Connection::Role::kTenantProcess) leave_tenant(id, connection);
  per_uid_.release(connection.peer.uid);
  connections_.erase(id);
}

// ---------------------------------------------------------------------------
// Scheduling

void Server::apply_token_changes(TimeNs now) {
  for (;;) {
    const std::vector<TokenChange> changes = scheduler_.take_changes();
    if (changes.empty()) break;
    for (std::size_t i = 0; i < changes.size(); ++i) {
      const TokenChange& change = changes[i];
      const std::string name = tenant_name(change.tenant);
      switch (change.kind) {
        case TokenChange::Kind::kGrant: {
          const uint32_t grant = board_->grant(change.device, change.tenant);
          handoffs_.granted(change.device, change.tenant, grant);
          registry_.clear_wants(change.tenant, change.device);
          spdlog::debug("device {}: granted to {} (grant {})", change.device, name, grant);
          break;
        }
        case TokenChange::Kind::kRevoke: {
          board_->revoke(change.device, change.tenant);
          spdlog::debug("device {}: revoked from {} ({})", change.device, name,
                        release_reason(change.reason));
          // A Want that came while the tenant held the token was not for
          // that grant (its process had not seen it yet): it counts now.
          if (registry_.wants(change.tenant, change.device))
            scheduler_.set_wanting(change.tenant, change.device, true, now);
          const auto verdict = handoffs_.revoked(
              change.device, registry_.processes_seeing(change.tenant, change.device));
          if (verdict == HandoffTracker::Verdict::kComplete)
            scheduler_.holder_drained(change.tenant, change.device, now);
          break;
        }
        case TokenChange::Kind::kRelease: {
          if (change.reason == TokenChange::Reason::kAckTimeout) {
            std::string owing;
            for (const ConnectionId id : handoffs_.owing(change.device))
              if (const ProcessRecord* process = registry_.process(id))
                owing += (owing.empty() ? "" : ",") + std::to_string(process->pid);
            spdlog::warn(
                "device {}: tenant {} did not acknowledge within {} ms (pids {}); the token is "
                "taken back anyway, its queued kernels may overlap the next tenant's, and the "
                "time until its late Acks is charged to it",
                change.device, name, config_.scheduler.ack_timeout_ns / kNsPerMs, owing);
            handoffs_.forced(change.device);
          }
          spdlog::debug("device {}: released by {} after {} us ({})", change.device, name,
                        change.held_ns / 1000, release_reason(change.reason));
          handoffs_.released(change.device);
          // A grant right behind clears the word itself, without a wake
          // (TokenBoard::grant): one wake per handoff.
          const bool grant_follows = i + 1 < changes.size() &&
                                     changes[i + 1].kind == TokenChange::Kind::kGrant &&
                                     changes[i + 1].device == change.device;
          if (!grant_follows) board_->clear(change.device);
          break;
        }
      }
    }
  }
  for (DeviceIndex device = 0; device < board_->device_count(); ++device)
    board_->set_waiting(device, scheduler_.waiting(device));
  left_tenants_.clear();
}

std::string Server::tenant_name(TenantNumber tenant) const {
  if (const TenantRecord* record = registry_.tenant(tenant)) return record->id;
  const auto left = left_tenants_.find(tenant);
  return left != left_tenants_.end() ? left->second : "#" + std::to_string(tenant);
}

void Server::after_events() {
  const TimeNs now = EventLoop::now();
  scheduler_.advance(now);
  apply_token_changes(now);
  reaper_.advance(now);
  watchers_->advance(now);
  for (const TenantNumber tenant : orphans_.due(now))
    kill_orphan(tenant);

  while (!hello_deadlines_.empty() && hello_deadlines_.front().first <= now) {
    const ConnectionId id = hello_deadlines_.front().second;
    hello_deadlines_.pop_front();
    const auto found = connections_.find(id);
    if (found != connections_.end() && found->second.role == Connection::Role::kNew)
      drop_connection(
          id, "said nothing for " + std::to_string(kHelloTimeoutNs / kNsPerMs / 1000) + " s");
  }
  if (accepting_paused_ && now >= accepting_resumes_at_) {
    accepting_paused_ = false;
    loop_->change(listener_watch_, kReadable);
  }
  if (usage_ && now >= next_usage_at_) {
    record_usage(now);
    next_usage_at_ = now + config_.usage_interval_ns;
  }
  if (totals_.any_bound() && now >= next_rooms_at_) {
    totals_.refresh_rooms();
    next_rooms_at_ = now + MemoryTotals::kRoomRefreshNs;
  }
  // Scheduler changes may come from closes above.
  apply_token_changes(now);

  // Processes that closed their connection but live on (departed_) do not
  // keep the server: their ledger reaps itself when they die.
  const bool idle = connections_.empty() && registry_.tenants().empty() && !reaper_.busy();
  if (config_.mode == ServerMode::kUser && config_.idle_exit_ns > 0 && idle) {
    if (!idle_since_) idle_since_ = now;
    if (now - *idle_since_ >= config_.idle_exit_ns) {
      stopping_ = true;
      stop_reason_ = "no tenant for " + std::to_string(config_.idle_exit_ns / kNsPerMs / 1000) +
                     " s (idle exit)";
    }
  } else {
    idle_since_.reset();
  }
  const std::optional<TimeNs> deadline = next_deadline(now);
  timer_->arm(deadline.value_or(kNever));
}

std::optional<TimeNs> Server::next_deadline(TimeNs now) const {
  std::optional<TimeNs> earliest = scheduler_.next_deadline(now);
  const auto consider = [&](std::optional<TimeNs> at) {
    if (at) earliest = std::min(earliest.value_or(*at), *at);
  };
  consider(reaper_.next_deadline());
  consider(orphans_.next_deadline());
  consider(watchers_->next_deadline());
  if (!hello_deadlines_.empty()) consider(hello_deadlines_.front().first);
  if (accepting_paused_) consider(accepting_resumes_at_);
  if (idle_since_) consider(*idle_since_ + config_.idle_exit_ns);
  if (usage_) consider(next_usage_at_);
  if (totals_.any_bound()) consider(next_rooms_at_);
  return earliest;
}

void Server::record_usage(TimeNs now) {
  usage_->observe(status_snapshot(now).report, now, wall_clock_ns());
  save_usage();
}

void Server::save_usage() {
  std::string error;
  if (usage_->save(error)) {
    if (usage_failing_) spdlog::info("usage: {} written again", usage_->path());
    usage_failing_ = false;
  } else if (!usage_failing_) {
    spdlog::error("usage: {} (kept in memory, tried again at the next sample)", error);
    usage_failing_ = true;
  }
}

StatusSnapshot Server::status_snapshot(TimeNs now) const {
  StatusSnapshot snapshot;
  protocol::status::Report& status = snapshot.report;
  status.server.pid = ::getpid();
  status.server.mode = mode_name(config_.mode);
  status.server.socket = socket_path();
  status.server.quantum_us = static_cast<uint64_t>(config_.scheduler.quantum_ns / 1000);
  status.server.uptime_s = static_cast<double>(now - started_at_) / 1e9;
  status.server.protocol = protocol::kVersion;
  if (metrics_) status.server.metrics = metrics_->address().text();
  if (watchers_) status.unmanaged = watchers_->unmanaged_status();

  for (DeviceIndex device = 0; device < board_->device_count(); ++device) {
    if (!board_->in_use(device)) continue;
    protocol::status::BoardDevice entry;
    entry.board_index = device;
    entry.uuid = format_gpu_uuid(board_->uuid(device));
    if (const TenantRecord* holder = registry_.tenant(scheduler_.holder(device)))
      entry.holder = holder->id;
    entry.waiting = scheduler_.waiting(device);
    status.devices.push_back(entry);
  }
  for (const MemoryTotals::TotalState& total : totals_.report()) {
    protocol::status::MemoryTotal entry;
    entry.scope = total.group ? "group" : "user";
    entry.id = total.id;
    entry.name = total.group ? group_name(total.id) : user_name(total.id);
    if (total.device != kAllDevices) {
      entry.board_index = total.device;
      entry.uuid = format_gpu_uuid(board_->uuid(total.device));
    }
    entry.total = total.total;
    entry.used = total.used;
    entry.promised = total.promised;
    entry.tenants = total.tenants;
    status.memory_totals.push_back(std::move(entry));
  }

  for (const auto& [number, tenant] : registry_.tenants()) {
    protocol::status::Tenant entry;
    entry.tenant = tenant.id;
    entry.number = number;
    entry.uid = tenant.uid;
    entry.user = tenant.user;
    entry.command = tenant.command;
    entry.gid = tenant.gid;
    entry.group = tenant.group;
    entry.group_share = tenant.branch.group_share;
    entry.user_share = tenant.branch.user_share;
    if (tenant.share.sm_percent != 0) entry.sm_percent = tenant.share.sm_percent;
    entry.weight = tenant.share.weight;
    entry.priority = tenant.share.priority;
    std::string ledger_path;
    for (const ConnectionId id : tenant.processes) {
      const ProcessRecord* process = registry_.process(id);
      entry.pids.push_back(process->pid);
      if (ledger_path.empty()) ledger_path = process->ledger_path;
    }
    std::sort(entry.pids.begin(), entry.pids.end());
    if (const std::optional<Orphans::Status> orphan = orphans_.status(number)) {
      entry.leader = orphan->leader;
      if (orphan->orphaned_at)
        entry.orphaned_s = static_cast<double>(now - *orphan->orphaned_at) / 1e9;
      if (orphan->ends_at)
        entry.orphan_kill_in_s =
            static_cast<double>(std::max<TimeNs>(*orphan->ends_at - now, 0)) / 1e9;
    }
    // The ledger is read, never mapped: a file its tenant truncates
    // meanwhile cannot hurt the server.
    std::vector<shm::LedgerDeviceUsage> usage;
    std::string error;
    if (!shm::read_ledger_usage(ledger_path, tenant.uid, usage, error)) usage.clear();
    for (const DeviceIndex device : registry_.devices_of(number)) {
      const DeviceUuid uuid = board_->uuid(device);
      protocol::status::TenantDevice figures;
      figures.uuid = format_gpu_uuid(uuid);
      for (const shm::LedgerDeviceUsage& ledger_device : usage) {
        if (ledger_device.uuid != uuid) continue;
        figures.memory_used = ledger_device.used;
        figures.memory_cap = ledger_device.cap;
        figures.oom_denials = ledger_device.oom_denials;
      }
      const DeviceShareFigures shares = scheduler_.figures(number, device, now);
      figures.share_target = shares.share_target;
      figures.share_achieved = shares.share_achieved;
      figures.held_ns = static_cast<uint64_t>(shares.held_ns);
      const TenantDeviceCounters counters = scheduler_.statistics(number, device, now);
      figures.wait_ns = static_cast<uint64_t>(counters.wait_ns);
      figures.grants = counters.grants;
      figures.revokes = counters.revokes;
      figures.overruns = counters.overruns;
      figures.overrun_ns = static_cast<uint64_t>(counters.overrun_ns);
      snapshot.waits[{entry.tenant, figures.uuid}] = counters.waits;
      entry.devices.push_back(std::move(figures));
    }
    status.tenants.push_back(std::move(entry));
  }
  if (usage_)
    for (const auto& [user, totals] : usage_->user_totals())
      snapshot.usage[user] = {totals.gpu_seconds, totals.gib_hours};
  return snapshot;
}

}  // namespace gpulimit::server
