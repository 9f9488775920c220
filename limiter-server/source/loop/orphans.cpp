#include "gpulimit/server/loop/orphans.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "gpulimit/server/loop/process_descriptor.h"

namespace gpulimit::server {

Orphans::Orphans(EventLoop& loop, Orphaned orphaned)
    : loop_(loop), orphaned_(std::move(orphaned)) {}

Orphans::~Orphans() {
  for (auto& [tenant, entry] : entries_)
    stop_watching(entry);
}

void Orphans::watch(TenantNumber tenant, const protocol::JobLeader& leader, TimeNs now) {
  if (leader.pid <= 0 || entries_.contains(tenant)) return;
  Entry& entry = entries_[tenant];
  entry.status.leader = leader.pid;
  // The pidfd first, then the start time: the descriptor pins whichever
  // process has the pid, and the start time says whether it is the leader.
  entry.pidfd = pidfd_open(leader.pid);
  if (entry.pidfd < 0 && errno != ESRCH) {
    // No pidfd for a reason other than the leader's absence (a kernel
    // before 5.3, no descriptors left): nobody could learn of its exit, so
    // the tenant is shown as led by nobody known, never as an orphan.
    entries_.erase(tenant);
    return;
  }
  protocol::JobLeader now_there;
  if (entry.pidfd < 0 || !protocol::read_job_leader(leader.pid, now_there) || now_there != leader) {
    leader_exited(tenant, now);
    return;
  }
  Result<EventLoop::WatchId> watched =
      loop_.watch(entry.pidfd, EPOLLIN, [this, tenant](uint32_t) {
        leader_exited(tenant, EventLoop::now());
      });
  if (watched) {
    entry.watch = *watched;
  } else {
    // Without a watch nobody would learn of the exit: the tenant is shown
    // as led by nobody known, never as an orphan.
    stop_watching(entry);
    entries_.erase(tenant);
  }
}

void Orphans::forget(TenantNumber tenant) {
  const auto found = entries_.find(tenant);
  if (found == entries_.end()) return;
  stop_watching(found->second);
  entries_.erase(found);
}

std::optional<Orphans::Status> Orphans::status(TenantNumber tenant) const {
  const auto found = entries_.find(tenant);
  if (found == entries_.end()) return std::nullopt;
  return found->second.status;
}

std::size_t Orphans::orphan_count() const {
  std::size_t count = 0;
  for (const auto& [tenant, entry] : entries_)
    if (entry.status.orphaned_at) ++count;
  return count;
}

void Orphans::end_at(TenantNumber tenant, TimeNs deadline) {
  const auto found = entries_.find(tenant);
  if (found != entries_.end() && found->second.status.orphaned_at)
    found->second.status.ends_at = deadline;
}

std::vector<TenantNumber> Orphans::due(TimeNs now) {
  std::vector<TenantNumber> due;
  for (auto& [tenant, entry] : entries_) {
    if (!entry.status.ends_at || *entry.status.ends_at > now) continue;
    entry.status.ends_at.reset();
    entry.status.killed = true;
    due.push_back(tenant);
  }
  return due;
}

std::optional<TimeNs> Orphans::next_deadline() const {
  std::optional<TimeNs> earliest;
  for (const auto& [tenant, entry] : entries_)
    if (entry.status.ends_at) earliest = std::min(earliest.value_or(kNever), *entry.status.ends_at);
  return earliest;
}

void Orphans::leader_exited(TenantNumber tenant, TimeNs now) {
  const auto found = entries_.find(tenant);
  if (found == entries_.end() || found->second.status.orphaned_at) return;
  stop_watching(found->second);
  found->second.status.orphaned_at = now;
  orphaned_(tenant);
}

void Orphans::stop_watching(Entry& entry) {
  if (entry.watch) loop_.unwatch(entry.watch);
  entry.watch = 0;
  if (entry.pidfd >= 0) ::close(entry.pidfd);
  entry.pidfd = -1;
}

}  // namespace gpulimit::server
