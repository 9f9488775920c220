// Jobs that outlive their main process. A tenant names its job's leader
// (protocol/job_leader.h: the process `gpulimit` exec'd, or the first CUDA
// process of a job started without it); gpulimitd watches the leader through
// a pidfd. Once the leader has exited while processes of the tenant still
// use the GPU, the tenant is an orphan: the usual "memory not freed after
// the job ended", a dataloader or a server child left behind. The server
// shows and logs it and, by the policy's `orphans = "kill"`, ends it after
// `orphan_grace` (policy.h, OrphanRule).
//
// A tenant is believed only about itself: a false leader makes its own
// tenant an orphan early, never another tenant. The leader is told apart
// from a later process given its pid by its start time.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "gpulimit/protocol/job_leader.h"
#include "gpulimit/server/loop/event_loop.h"
#include "gpulimit/server/scheduling/scheduling_types.h"

namespace gpulimit::server {

class Orphans {
 public:
  // Called when a tenant becomes an orphan, from watch() or from the loop.
  using Orphaned = std::function<void(TenantNumber tenant)>;

  Orphans(EventLoop& loop, Orphaned orphaned);
  ~Orphans();
  Orphans(const Orphans&) = delete;
  Orphans& operator=(const Orphans&) = delete;

  // `tenant` (just created) names `leader`. A leader that is not alive now,
  // or whose pid another process has taken, has exited: the tenant is an
  // orphan from `now` (reported before this returns).
  void watch(TenantNumber tenant, const protocol::JobLeader& leader, TimeNs now);
  // The tenant left (its last process is gone): nothing more to watch.
  void forget(TenantNumber tenant);

  struct Status {
    pid_t leader = 0;
    std::optional<TimeNs> orphaned_at;  // when the leader was seen gone
    std::optional<TimeNs> ends_at;      // when it is to be killed
    bool killed = false;                // due() has returned it
  };
  // nullopt when the tenant names no leader.
  std::optional<Status> status(TenantNumber tenant) const;
  std::size_t orphan_count() const;

  // The orphan is to be killed at `deadline` (a policy of kill).
  void end_at(TenantNumber tenant, TimeNs deadline);
  // Orphans whose deadline has come, each returned once.
  std::vector<TenantNumber> due(TimeNs now);
  std::optional<TimeNs> next_deadline() const;

 private:
  struct Entry {
    Status status;
    int pidfd = -1;
    EventLoop::WatchId watch = 0;
  };
  void leader_exited(TenantNumber tenant, TimeNs now);
  void stop_watching(Entry& entry);

  EventLoop& loop_;
  Orphaned orphaned_;
  std::map<TenantNumber, Entry> entries_;
};

}  // namespace gpulimit::server
