// What gpulimitd does with what its watchers report: the kernel-side
// watcher (watcher.h), the driver cross-check (driver_cross_check.h,
// driver_nvml.h) and the unmanaged processes both find
// (watcher_unmanaged.h). The Server owns one, tells it which processes are
// its tenants', and hands it their events from its loop; it reads the
// tenants from the registry and tells the Server when a tenant process is
// seen to exit.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpulimit/protocol/status.h"
#include "gpulimit/server/loop/event_loop.h"
#include "gpulimit/server/loop/tenant_registry.h"
#include "gpulimit/server/result.h"
#include "gpulimit/server/watcher/driver_nvml.h"
#include "gpulimit/server/watcher/watcher.h"
#include "gpulimit/server/watcher/watcher_config.h"
#include "gpulimit/server/watcher/watcher_unmanaged.h"

namespace gpulimit::server {

// The BPF watcher as `config` asks: null when off, or unavailable in auto
// mode, with the reason in `why_not` (for the server to say once it
// serves: a server that cannot start says only why); a failure only for
// --watch=on.
Result<std::unique_ptr<GpuWatcher>> open_watcher(const WatcherConfig& config, std::string* why_not);

class Watchers {
 public:
  // A tenant process has exited (the BPF exit event): its connections are
  // closed. False when it had none open.
  using TenantExited = std::function<bool(pid_t pid)>;

  // Watches `watcher`'s ring buffer (null: no BPF watcher) and starts the
  // driver cross-check where `config` asks for one and it can run, on
  // `loop`. `only_uid`: a per-user server answers for its own user's
  // processes only. Fails only when the loop cannot watch them.
  static Result<std::unique_ptr<Watchers>> start(const WatcherConfig& config,
                                                 std::optional<uid_t> only_uid, EventLoop& loop,
                                                 const TenantRegistry& registry,
                                                 TenantExited tenant_exited,
                                                 std::unique_ptr<GpuWatcher> watcher);
  Watchers(const Watchers&) = delete;
  Watchers& operator=(const Watchers&) = delete;

  // A tenant process joined or left: it is not unmanaged, and its exit is
  // reported while it is a tenant's.
  void tenant_joined(pid_t pid);
  void tenant_left(pid_t pid);

  // The unmanaged processes' grace periods, from the event loop.
  void advance(TimeNs now) { unmanaged_.advance(now); }
  std::optional<TimeNs> next_deadline() const { return unmanaged_.next_deadline(); }
  // Drops unmanaged processes that have exited (before a status is sent).
  void forget_gone() { unmanaged_.forget_gone(); }
  std::vector<protocol::status::UnmanagedProcess> unmanaged_status() const;

  // Since the server started: GPU processes seen running without gpulimit,
  // times a tenant's memory drifted from the driver's account, tenant
  // exits the BPF watcher reported first.
  uint64_t unmanaged_processes_seen() const { return unmanaged_.seen(); }
  uint64_t driver_drifts_seen() const { return drifts_seen_; }
  uint64_t exits_seen_by_watcher() const { return exits_from_watcher_; }

 private:
  Watchers(const WatcherConfig& config, std::optional<uid_t> only_uid,
           const TenantRegistry& registry, TenantExited tenant_exited);
  void watch_event(const WatchEvent& event);
  void driver_sample_ready();

  WatcherConfig config_;
  const TenantRegistry& registry_;
  TenantExited tenant_exited_;
  UnmanagedProcesses unmanaged_;
  std::unique_ptr<GpuWatcher> watcher_;    // null: no BPF watcher
  std::unique_ptr<DriverSampler> driver_;  // null: no driver cross-check
  std::string driver_error_;               // the last one logged
  // (tenant, GPU) pairs drifting from, or over their cap by, the driver's
  // account: said when they start.
  std::set<std::pair<std::string, std::string>> drifting_;
  std::set<std::pair<std::string, std::string>> over_cap_;
  uint64_t drifts_seen_ = 0;
  uint64_t exits_from_watcher_ = 0;
};

}  // namespace gpulimit::server
