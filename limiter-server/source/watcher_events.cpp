// What gpulimitd does with what the kernel-side watcher (watcher.h) and the
// driver cross-check (driver_cross_check.h, driver_nvml.h) report: the
// Server's side of both, kept apart from the scheduling in server.cpp.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "gpulimit/server/server.h"
#include "gpulimit/shm/ledger_inspection.h"

namespace gpulimit::server {

Result<std::unique_ptr<GpuWatcher>> open_watcher(const WatcherConfig& config,
                                                 std::string* why_not) {
  if (config.mode == WatchMode::kOff) return std::unique_ptr<GpuWatcher>();
  Result<std::unique_ptr<GpuWatcher>> watcher = GpuWatcher::open();
  if (watcher) return watcher;
  if (config.mode == WatchMode::kOn)
    return fail("--watch=on, but the BPF watcher cannot run: " + watcher.error());
  *why_not = watcher.error();
  return std::unique_ptr<GpuWatcher>();
}

Result<void> Server::start_watching(std::unique_ptr<GpuWatcher> watcher) {
  const WatcherConfig& watch = config_.watcher;
  // A per-user server answers for its own user's processes only: another
  // user's gpulimit jobs are another server's tenants.
  const std::optional<uid_t> only_uid =
      config_.mode == ServerMode::kUser ? std::optional<uid_t>(::geteuid()) : std::nullopt;
  // Unless a test gave its own lookup: the policy file's answer for the
  // process's user and groups, read at each sighting (SIGHUP replaces the
  // policy), else --unmanaged.
  WatcherConfig effective = watch;
  if (!effective.unmanaged_policy)
    effective.unmanaged_policy = [this](uid_t uid, gid_t gid) {
      const UnmanagedAction otherwise = config_.watcher.unmanaged_default;
      return policy_ ? policy_->unmanaged_action(uid, gid, otherwise) : otherwise;
    };
  unmanaged_ = std::make_unique<UnmanagedProcesses>(effective, machine_process_probe(), only_uid);

  if (watcher) {
    Result<EventLoop::WatchId> watched = loop_->watch(watcher->fd(), EPOLLIN, [this](uint32_t) {
      watcher_->consume([this](const WatchEvent& event) { watch_event(event); });
    });
    if (!watched) return fail("watching the BPF ring buffer: " + watched.error());
    watcher_ = std::move(watcher);
    spdlog::info(
        "BPF watcher loaded: tenant exits and opens of /dev/nvidia* by other "
        "processes are reported (unmanaged: {})",
        unmanaged_action_name(watch.unmanaged_default));
  }

  if (watch.cross_check_interval_ns > 0) {
    if (!runs_in_initial_pid_namespace()) {
      spdlog::info(
          "no driver cross-check: gpulimitd runs in a pid namespace of its own, and "
          "NVML's host pids are not its tenants' pids");
      return {};
    }
    Result<std::unique_ptr<DriverSampler>> sampler =
        DriverSampler::start(watch.cross_check_interval_ns);
    if (!sampler) {
      spdlog::info("no driver cross-check: {}", sampler.error());
      return {};
    }
    Result<EventLoop::WatchId> watched =
        loop_->watch((*sampler)->fd(), EPOLLIN, [this](uint32_t) { driver_sample_ready(); });
    if (!watched) return fail("watching the driver sampler: " + watched.error());
    driver_ = std::move(*sampler);
    spdlog::info("driver cross-check every {} ms (drift threshold {} MiB)",
                 watch.cross_check_interval_ns / kNsPerMs, watch.drift_threshold_bytes >> 20);
  }
  return {};
}

uint64_t Server::unmanaged_processes_seen() const {
  return unmanaged_ ? unmanaged_->seen() : 0;
}

void Server::track_tenant_process(pid_t pid) {
  unmanaged_->joined(pid);
  if (watcher_ && !watcher_->track(pid))
    spdlog::warn("pid {}: cannot add it to the BPF watcher's tenant map", pid);
}

void Server::untrack_tenant_process(pid_t pid) {
  if (watcher_) watcher_->untrack(pid);
}

void Server::watch_event(const WatchEvent& event) {
  if (event.kind == WatchEvent::Kind::kOpen) {
    spdlog::debug("watcher: pid {} ({}, uid {}) opened {}", event.pid, event.command, event.uid,
                  event.path);
    unmanaged_->sighted(
        {event.pid, event.uid, event.gid, event.start_ticks, event.command, event.path},
        EventLoop::now());
    return;
  }
  // A tenant process is gone: its token goes now, as when its pidfd fires
  // (whichever comes first; the second finds nothing left to do). Its
  // ledger is recounted when the pidfd fires: the process closes its files,
  // and with them its liveness locks, only after this tracepoint.
  std::vector<ConnectionId> gone;
  for (const auto& [id, connection] : connections_)
    if (connection.role == Connection::Role::kTenantProcess && connection.peer.pid == event.pid)
      gone.push_back(id);
  if (gone.empty()) return;
  ++exits_from_watcher_;
  for (const ConnectionId id : gone) {
    spdlog::debug("{} exited (reported by the BPF exit event)", describe_peer(id));
    close_connection(id);
  }
}

void Server::driver_sample_ready() {
  std::string error;
  std::optional<std::vector<DriverDeviceSample>> sample = driver_->take(error);
  if (!sample) {
    if (!error.empty() && error != driver_error_)
      spdlog::warn("driver cross-check: {} (said once, until it changes)", error);
    driver_error_ = error;
    return;
  }
  driver_error_.clear();

  std::vector<TenantLedgerView> tenants;
  for (const auto& [number, tenant] : registry_.tenants()) {
    TenantLedgerView view;
    view.tenant = tenant.id;
    view.uid = tenant.uid;
    view.gid = tenant.gid;
    std::string ledger_path;
    for (const ConnectionId id : tenant.processes) {
      const ProcessRecord* process = registry_.process(id);
      view.pids.push_back(process->pid);
      if (ledger_path.empty()) ledger_path = process->ledger_path;
    }
    std::vector<shm::LedgerDeviceUsage> usage;
    if (shm::read_ledger_usage(ledger_path, tenant.uid, usage, error))
      for (const shm::LedgerDeviceUsage& device : usage)
        view.devices.push_back({format_gpu_uuid(device.uuid), device.used, device.cap});
    tenants.push_back(std::move(view));
  }
  const CrossCheckFindings findings =
      cross_check(*sample, tenants, config_.watcher.drift_threshold_bytes);

  // Drift and over-cap are logged when they start; again only after they
  // have ended and start anew.
  std::set<std::pair<std::string, std::string>> drifting;
  for (const CrossCheckFindings::Drift& drift : findings.drifts) {
    drifting.emplace(drift.tenant, drift.uuid);
    if (drifting_.contains({drift.tenant, drift.uuid})) continue;
    ++drifts_seen_;
    spdlog::warn("tenant {} on {}: the driver counts {} MiB, its ledger {} MiB", drift.tenant,
                 drift.uuid, drift.driver_bytes >> 20, drift.ledger_bytes >> 20);
  }
  drifting_ = std::move(drifting);

  std::set<std::pair<std::string, std::string>> over_cap;
  for (const CrossCheckFindings::OverCap& over : findings.over_cap) {
    over_cap.emplace(over.tenant, over.uuid);
    if (over_cap_.contains({over.tenant, over.uuid})) continue;
    const UnmanagedAction action = unmanaged_->action_for(over.uid, over.gid);
    if (action == UnmanagedAction::kAllow) continue;
    spdlog::warn("tenant {} on {}: the driver counts {} MiB, over its cap of {} MiB{}", over.tenant,
                 over.uuid, over.driver_bytes >> 20, over.cap >> 20,
                 action == UnmanagedAction::kKill ? "; killing its processes there" : "");
    if (action != UnmanagedAction::kKill) continue;
    const ProcessProbe probe = machine_process_probe();
    for (const pid_t pid : over.pids)
      if (const std::optional<UnmanagedSighting> process = describe_process(pid))
        probe.kill(pid, process->start_ticks);
  }
  over_cap_ = std::move(over_cap);

  const TimeNs now = EventLoop::now();
  for (const CrossCheckFindings::Stranger& stranger : findings.strangers) {
    std::optional<UnmanagedSighting> process = describe_process(stranger.pid);
    if (!process) continue;  // gone since
    process->device = stranger.uuid;
    unmanaged_->sighted(*process, now);
  }
  unmanaged_->forget_gone();
}

std::vector<protocol::status::UnmanagedProcess> Server::unmanaged_status() const {
  std::vector<protocol::status::UnmanagedProcess> entries;
  if (!unmanaged_) return entries;
  for (const UnmanagedProcess& process : unmanaged_->list())
    entries.push_back({process.pid, process.uid, process.user, process.command, process.device});
  return entries;
}

}  // namespace gpulimit::server
