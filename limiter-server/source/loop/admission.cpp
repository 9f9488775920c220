// Tenant admission and departure, the Server's side of a tenant process's
// life: its Hello checked (hello_validation.h) and its devices against the
// machine's (machine_gpus.h), its limits clamped to the policy
// (limits_policy.h), its devices published on the board, the
// process joined to its tenant (tenant_registry.h) and welcomed; and when
// its connection closes, its tokens and pending handoffs given up, the
// board slots no process uses any more freed, and, once
// the kernel says it has exited, its ledger reaped (ledger_reaper.h).
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "gpulimit/server/loop/hello_validation.h"
#include "gpulimit/server/loop/process_descriptor.h"
#include "gpulimit/server/loop/server.h"
#include "gpulimit/server/metrics/process_command.h"
#include "gpulimit/server/metrics/status_report.h"
#include "gpulimit/server/policy/limits_policy.h"
#include "gpulimit/server/policy/user_accounts.h"
#include "gpulimit/shm/tenant_ledger.h"

namespace gpulimit::server {
namespace {

// Whether the peer of a connected socket has closed its end.
bool hung_up(int fd) {
  pollfd probe{fd, POLLIN, 0};
  return ::poll(&probe, 1, 0) == 1 && (probe.revents & (POLLHUP | POLLERR)) != 0;
}

}  // namespace

bool Server::handle_hello(ConnectionId id, Connection& connection, const protocol::Hello& hello) {
  // Every check that can refuse comes before the board is written: a
  // refused Hello leaves no slot behind.
  Result<TenantRequest> request = validate_hello(hello, connection.peer.pid);
  if (!request) {
    refuse(id, connection, request.error());
    return false;
  }
  if (const std::optional<std::string> unknown = gpus_.refusal(request->uuids, config_.mode)) {
    refuse(id, connection, *unknown);
    return false;
  }
  std::vector<DeviceMemoryRequest> memory;
  for (std::size_t i = 0; i < request->uuids.size(); ++i)
    memory.push_back({request->uuids[i], hello.memory_requested[i], hello.memory_total[i]});
  const Result<Grant> grant = clamp_to_policy(
      policy_.get(), identify(connection.peer.uid, connection.peer.gid), request->share, memory);
  if (!grant) {
    refuse(id, connection, grant.error());
    return false;
  }
  const ComputeShare* share = &grant->share;

  // The pidfd is opened from the kernel's pid; if that process died and its
  // pid was reused since it connected, its end of the socket is closed.
  const int pidfd = pidfd_open(connection.peer.pid);
  if (pidfd < 0 || hung_up(connection.fd)) {
    if (pidfd >= 0) ::close(pidfd);
    spdlog::debug("{} left before it was welcomed", describe_peer(id));
    close_connection(id);
    return false;
  }

  Result<std::vector<DeviceIndex>> published = board_->publish(request->uuids);
  if (!published) {
    ::close(pidfd);
    refuse(id, connection, published.error());
    return false;
  }
  const std::vector<DeviceIndex>& devices = *published;
  protocol::Welcome welcome = protocol::make<protocol::Welcome>();
  for (std::size_t i = 0; i < devices.size(); ++i)
    welcome.board_device[i] = devices[i];
  welcome.device_count = static_cast<uint32_t>(devices.size());
  for (std::size_t i = 0; i < grant->memory_cap.size(); ++i)
    welcome.memory_cap[i] = grant->memory_cap[i];

  JoiningProcess joining;
  joining.connection = id;
  joining.pid = connection.peer.pid;
  joining.uid = connection.peer.uid;
  joining.gid = connection.peer.gid;
  joining.tenant_id = request->tenant;
  joining.share = *share;
  joining.branch = share_branch(policy_.get(), connection.peer.uid, connection.peer.gid);
  joining.devices = devices;
  joining.ledger_path =
      shm::TenantLedger::path_for(request->ledger_dir, connection.peer.uid, request->tenant);
  if (!registry_.find(connection.peer.uid, request->tenant)) {
    joining.user = user_name(connection.peer.uid);
    joining.group = group_name(connection.peer.gid);
    joining.command = process_command(connection.peer.pid);
  }
  const std::optional<JoinOutcome> joined = registry_.join(joining);
  if (!joined) {
    ::close(pidfd);
    withdraw_unused(devices, EventLoop::now());
    refuse(id, connection, "gpulimitd has run out of tenant numbers; restart it");
    return false;
  }
  connection.role = Connection::Role::kTenantProcess;
  connection.pidfd = pidfd;
  const pid_t pid = connection.peer.pid;
  if (config_.watcher.pidfd_exits) {
    Result<EventLoop::WatchId> watched = loop_->watch(pidfd, EPOLLIN, [this, id](uint32_t) {
      const auto found = connections_.find(id);
      if (found == connections_.end()) return;
      spdlog::debug("{} exited", describe_peer(id));
      close_connection(id);
    });
    if (watched) connection.pidfd_watch = *watched;
  }
  watchers_->tenant_joined(pid);

  const TenantRecord& tenant = *registry_.tenant(joined->tenant);
  if (joined->new_tenant) {
    scheduler_.add_tenant(tenant.number, tenant.share, tenant.branch);
    asked_shares_[tenant.number] = request->share;
    // Said once per tenant: its first process prints it (the library).
    if (!grant->notice.empty()) {
      std::strncpy(welcome.notice, grant->notice.c_str(), sizeof welcome.notice - 1);
      spdlog::info("tenant {}: {}", tenant.id, grant->notice);
    }
    std::string caps;  // "device 0 10G, device 1 uncapped"
    for (std::size_t i = 0; i < devices.size() && i < grant->memory_cap.size(); ++i)
      caps += (caps.empty() ? "device " : ", device ") + std::to_string(devices[i]) + " " +
              (grant->memory_cap[i] ? format_size(grant->memory_cap[i]) : "uncapped");
    spdlog::info(
        "tenant {} (#{}, user {}, uid {}, pid {}) joined: memory {}, sm {}, weight {}, priority {}",
        tenant.id, tenant.number, tenant.user, connection.peer.uid, pid,
        caps.empty() ? std::string("no device") : caps,
        tenant.share.sm_percent ? std::to_string(tenant.share.sm_percent) + " %"
                                : std::string("uncapped"),
        tenant.share.weight, priority_name(tenant.share.priority));
    // After the log line above: an orphan from the start says so next.
    orphans_.watch(tenant.number, request->leader, EventLoop::now());
  } else if (joined->share_differs) {
    spdlog::info(
        "pid {} asked for other limits than tenant {} has (sm {}, weight {}, priority "
        "{}); it shares the tenant's",
        pid, tenant.id, share->sm_percent, share->weight, priority_name(share->priority));
  }
  welcome.tenant_number = tenant.number;

  // Group and user memory totals: a bound device's cap is at most its
  // total, and the process reserves within its tenant's lease there.
  std::vector<MemoryTotals::DeviceSeen> seen;
  for (std::size_t i = 0; i < devices.size(); ++i)
    seen.push_back({devices[i], request->uuids[i]});
  std::string lease_error;
  const std::optional<MemoryTotals::Joined> leases =
      totals_.process_joined(tenant.number, joined->new_tenant, tenant.uid, tenant.gid,
                             joining.ledger_path, seen, policy_.get(), lease_error);
  if (!leases) {
    drop_connection(id, "cannot be given its tenant's lease page: " + lease_error);
    return false;
  }
  for (std::size_t i = 0; i < leases->bound.size(); ++i)
    if (const std::optional<uint64_t> total = leases->bound[i])
      welcome.memory_cap[i] =
          welcome.memory_cap[i] ? std::min(welcome.memory_cap[i], *total) : *total;
  welcome.leased_devices = leases->leased;
  const int lease_fd = leases->page ? leases->page->read_only_descriptor() : -1;
  if (leases->page && lease_fd < 0) {
    drop_connection(id,
                    std::string("cannot open its lease page read-only: ") + std::strerror(errno));
    return false;
  }
  const bool welcomed = protocol::send_message(connection.fd, &welcome, sizeof welcome,
                                               board_->read_only_descriptor(), lease_fd);
  const int send_errno = errno;
  if (lease_fd >= 0) ::close(lease_fd);
  if (!welcomed) {
    drop_connection(id, std::string("cannot be sent its Welcome: ") + std::strerror(send_errno));
    return false;
  }
  spdlog::debug("pid {} joined tenant {} (#{}), {} GPU(s)", pid, tenant.id, tenant.number,
                devices.size());
  return true;
}

void Server::leave_tenant(ConnectionId id, Connection& connection) {
  const TimeNs now = EventLoop::now();
  // A tenant's last process leaving takes its figures along: sampled first.
  if (usage_) {
    const ProcessRecord* process = registry_.process(id);
    const TenantRecord* tenant = process ? registry_.tenant(process->tenant) : nullptr;
    if (tenant && tenant->processes.size() == 1)
      usage_->observe(status_snapshot(now).report, now, wall_clock_ns());
  }
  std::optional<LeaveOutcome> left = registry_.leave(id);
  if (!left) return;
  watchers_->tenant_left(connection.peer.pid);
  const TenantNumber tenant = left->tenant;
  for (const DeviceIndex device : left->process.devices) {
    const HandoffTracker::Left done = handoffs_.process_left(device, id);
    if (done.late_drained) scheduler_.late_drained(tenant, device, now);
    if (done.drained) scheduler_.holder_drained(tenant, device, now);
  }
  for (const DeviceIndex device : left->devices_left)
    scheduler_.leave_device(tenant, device, now);
  for (const DeviceIndex device : left->wants_dropped)
    scheduler_.set_wanting(tenant, device, false, now);
  withdraw_unused(left->devices_left, now);
  if (left->tenant_gone) {
    left_tenants_[tenant] = left->tenant_id;
    scheduler_.remove_tenant(tenant, now);
    asked_shares_.erase(tenant);
    const std::optional<Orphans::Status> orphan = orphans_.status(tenant);
    const bool killed = orphan && orphan->killed;
    orphans_.forget(tenant);
    spdlog::info("tenant {} (#{}) left: its last process, pid {}, is gone", left->tenant_id, tenant,
                 connection.peer.pid);
    if (usage_) {
      usage_->ended(tenant, killed ? usage::kEndedOrphanKilled : usage::kEndedLeft,
                    wall_clock_ns());
      save_usage();
    }
  } else {
    for (const DeviceIndex device : left->process.devices) {
      if (scheduler_.holder(device) != tenant || scheduler_.revoked(device)) continue;
      if (handoffs_.all_idle(device, registry_.processes_seeing(tenant, device)))
        scheduler_.holder_idle(tenant, device, now);
    }
  }

  // The ledger is reaped once the kernel says the process is gone (its
  // pidfd), when the dead process's ledger lock is surely released.
  // So are its tenant's memory leases (memory_totals.h): the kernel frees
  // a process's device memory when it exits, not when it hangs up.
  const pid_t pid = connection.peer.pid;
  if (connection.pidfd < 0) {
    totals_.process_exited(tenant);
    reaper_.request(left->process.ledger_path, connection.peer.uid, connection.peer.gid, now,
                    connection.peer.pid);
    return;
  }
  const auto [found, created] = departed_.try_emplace(pid);
  Departed& departed = found->second;
  departed.ledger_paths.push_back(left->process.ledger_path);
  departed.tenants.push_back(tenant);
  if (!created) {
    ::close(connection.pidfd);  // the pid is watched already
    return;
  }
  // Its pidfd stays open until it exits: one of its user's connections
  // until then (connection_limits.h).
  per_uid_.add(connection.peer.uid);
  departed.pidfd = connection.pidfd;
  departed.uid = connection.peer.uid;
  departed.gid = connection.peer.gid;
  Result<EventLoop::WatchId> watched =
      loop_->watch(departed.pidfd, EPOLLIN, [this, pid](uint32_t) { process_exited(pid); });
  if (watched) {
    departed.watch = *watched;
  } else {
    process_exited(pid);
  }
}

void Server::withdraw_unused(const std::vector<DeviceIndex>& devices, TimeNs now) {
  for (const DeviceIndex device : devices) {
    if (!board_->in_use(device) || registry_.device_in_use(device)) continue;
    scheduler_.forget_device(device, now);
    spdlog::debug("device {} ({}): no process uses it; its board slot is free", device,
                  format_gpu_uuid(board_->uuid(device)));
    board_->withdraw(device);
  }
}

void Server::process_exited(pid_t pid) {
  const auto found = departed_.find(pid);
  if (found == departed_.end()) return;
  Departed departed = std::move(found->second);
  departed_.erase(found);
  if (departed.watch) loop_->unwatch(departed.watch);
  ::close(departed.pidfd);
  per_uid_.release(departed.uid);
  const TimeNs now = EventLoop::now();
  std::sort(departed.ledger_paths.begin(), departed.ledger_paths.end());
  departed.ledger_paths.erase(
      std::unique(departed.ledger_paths.begin(), departed.ledger_paths.end()),
      departed.ledger_paths.end());
  for (const std::string& path : departed.ledger_paths)
    reaper_.request(path, departed.uid, departed.gid, now, pid);
  for (const TenantNumber tenant : departed.tenants)
    totals_.process_exited(tenant);
}

// ---------------------------------------------------------------------------
// Orphans

namespace {

std::string pid_list(const TenantRegistry& registry, const TenantRecord& tenant) {
  std::string pids;
  for (const ConnectionId id : tenant.processes)
    if (const ProcessRecord* process = registry.process(id))
      pids += (pids.empty() ? "" : ",") + std::to_string(process->pid);
  return pids;
}

}  // namespace

void Server::tenant_orphaned(TenantNumber number) {
  const TenantRecord* tenant = registry_.tenant(number);
  const std::optional<Orphans::Status> orphan = orphans_.status(number);
  if (!tenant || !orphan || !orphan->orphaned_at) return;
  const OrphanRule rule = policy_ ? policy_->orphan_rule(identify(tenant->uid, tenant->gid),
                                                         config_.orphans)
                                  : config_.orphans;
  const std::string what =
      fmt::format("tenant {} (#{}, user {}): its job's main process, pid {}, has exited, and pids "
                  "{} of it still use the GPU",
                  tenant->id, number, tenant->user, orphan->leader, pid_list(registry_, *tenant));
  if (rule.action == OrphanAction::kKill) {
    orphans_.end_at(number, *orphan->orphaned_at + TimeNs{rule.grace_s} * 1000 * kNsPerMs);
    spdlog::warn("{}; they are killed in {} s (orphans = \"kill\")", what, rule.grace_s);
  } else {
    spdlog::warn("{}; they are left running (orphans = \"warn\")", what);
  }
}

void Server::kill_orphan(TenantNumber number) {
  const TenantRecord* tenant = registry_.tenant(number);
  if (!tenant) return;
  std::string killed;
  for (const ConnectionId id : tenant->processes) {
    const auto found = connections_.find(id);
    if (found == connections_.end() || found->second.pidfd < 0) continue;
    // The pidfd pins the process that connected: a pid given again to a
    // later process is never signalled.
    if (::syscall(SYS_pidfd_send_signal, found->second.pidfd, SIGKILL, nullptr, 0) == 0)
      killed += (killed.empty() ? "" : ",") + std::to_string(found->second.peer.pid);
  }
  spdlog::warn("tenant {} (#{}): an orphan past its grace; killed pids {} (SIGKILL)", tenant->id,
               number, killed.empty() ? std::string("none (all gone)") : killed);
}

}  // namespace gpulimit::server
