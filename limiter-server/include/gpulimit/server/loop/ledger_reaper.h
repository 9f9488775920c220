// Gives the memory of dead tenant processes back, promptly: when a tenant
// process exits, its tenant's ledger file is recounted (shm::reap_ledger),
// which frees the dead process's slot and bytes at once, instead of when a
// live process of the tenant next runs short of room.
//
// Each reap runs in a short-lived child process, for three reasons:
//   - a ledger is a file its tenant owns and can truncate at any moment;
//     mapped, that is a SIGBUS, which must kill a helper, never the server;
//   - a recount may wait (bounded) on a stopped process; the event loop
//     must not;
//   - as root (system mode) the child drops to the tenant's uid and gid
//     first, so it can do no more to the file than the tenant could.
// Reaps of one file are coalesced: one child at a time, and one more after
// it if another process of the tenant died meanwhile. A busy ledger (a
// process attaching, a reaper of the tenant at work) is retried shortly.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpulimit/server/loop/event_loop.h"
#include "gpulimit/server/scheduling/scheduling_types.h"

namespace gpulimit::server {

// A busy ledger is tried again after this long, this many times at most;
// its tenant's own processes reap it anyway if the server gives up.
inline constexpr TimeNs kReapRetryDelayNs = 10 * kNsPerMs;
inline constexpr int kReapAttempts = 100;
// A child still running after this long is killed.
inline constexpr TimeNs kReapChildTimeoutNs = 5'000 * kNsPerMs;

class LedgerReaper {
 public:
  explicit LedgerReaper(EventLoop& loop) : loop_(loop) {}
  ~LedgerReaper();
  LedgerReaper(const LedgerReaper&) = delete;
  LedgerReaper& operator=(const LedgerReaper&) = delete;

  // Reaps the ledger at `path`, owned by `owner` (group `group`), as soon as
  // it can. `dead_pid`, when known, is the process whose exit asked for it:
  // the log line of what the reap gave back names it.
  void request(const std::string& path, uid_t owner, gid_t group, TimeNs now, pid_t dead_pid = 0);
  // Starts the reaps that are due, kills children past their time.
  void advance(TimeNs now);
  std::optional<TimeNs> next_deadline() const;
  // Reaps waiting or running.
  bool busy() const { return !jobs_.empty(); }
  uint64_t reaps_done() const { return reaps_done_; }

 private:
  struct Job {
    uid_t owner = 0;
    gid_t group = 0;
    int attempts = 0;
    TimeNs due = 0;
    bool again = false;  // another reap asked for while this one runs
    pid_t child = -1;
    int pidfd = -1;
    int message_fd = -1;  // the child's one-line error, if any
    EventLoop::WatchId watch = 0;
    TimeNs started_at = 0;
    std::vector<pid_t> dead_pids;     // whose exits asked for the next reap
    std::vector<pid_t> reaping_pids;  // whose exits the running reap is for
  };

  void start(const std::string& path, Job& job, TimeNs now);
  void finished(const std::string& path);
  void forget_child(Job& job);

  EventLoop& loop_;
  std::map<std::string, Job> jobs_;
  uint64_t reaps_done_ = 0;
};

}  // namespace gpulimit::server
