// GPU processes that bypass gpulimit ("unmanaged"): seen by the watcher
// opening /dev/nvidia*, or by the driver cross-check holding GPU memory
// without being a tenant. Each is recorded once, counted, shown in status,
// and handled by the policy's action for its user and group: allow, warn
// (logged once) or kill (SIGKILL to that process and nothing else).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpulimit/server/scheduling/scheduling_types.h"
#include "gpulimit/server/watcher/watcher_config.h"

namespace gpulimit::server {

struct UnmanagedSighting {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  uint64_t start_ticks = 0;  // /proc/PID/stat's starttime; 0: unknown
  std::string command;
  std::string device;  // the node opened, or the GPU's UUID
};

// One unmanaged process, as status shows it.
struct UnmanagedProcess {
  pid_t pid = 0;
  uid_t uid = 0;
  std::string user;
  std::string command;
  std::string device;
  UnmanagedAction action = UnmanagedAction::kWarn;
};

// What the record asks of the machine; tests substitute their own.
struct ProcessProbe {
  // libgpulimit.so is mapped in the process: it may be about to join.
  std::function<bool(pid_t)> maps_gpulimit;
  // The process (pid, start ticks) still runs; start 0 matches any.
  std::function<bool(pid_t, uint64_t)> alive;
  // SIGKILLs that process, never a later one that got its pid.
  std::function<bool(pid_t, uint64_t)> kill;
  std::function<std::string(uid_t)> user_name;
};

// The machine's /proc and signals.
ProcessProbe machine_process_probe();
// A sighting of `pid` from /proc (uid, gid, start, command); nullopt when
// it is gone.
std::optional<UnmanagedSighting> describe_process(pid_t pid);

class UnmanagedProcesses {
 public:
  // `only_uid`: a per-user server watches its own user's processes only
  // (another user's gpulimit jobs are another server's tenants).
  UnmanagedProcesses(const WatcherConfig& config, ProcessProbe probe,
                     std::optional<uid_t> only_uid);

  // A process that is not a tenant uses a GPU. The first sighting of a
  // process is recorded, counted and acted on, at once, or after
  // kJoinGraceNs when it has libgpulimit.so mapped and may yet join.
  void sighted(const UnmanagedSighting& sighting, TimeNs now);
  // The process joined a tenant: it is managed, pending or not.
  void joined(pid_t pid);
  // Records the sightings whose grace has ended.
  void advance(TimeNs now);
  std::optional<TimeNs> next_deadline() const;
  // Drops processes that have exited.
  void forget_gone();

  std::vector<UnmanagedProcess> list() const;  // by pid
  // Distinct unmanaged processes recorded since the server started.
  uint64_t seen() const { return seen_; }
  // What to do about a process of `uid` and `gid`: the policy lookup's
  // answer, else the server-wide default.
  UnmanagedAction action_for(uid_t uid, gid_t gid) const;

 private:
  struct Entry {
    UnmanagedSighting sighting;
    UnmanagedAction action = UnmanagedAction::kWarn;
    std::string user;
  };
  struct Pending {
    UnmanagedSighting sighting;
    TimeNs due = 0;
  };

  void record(const UnmanagedSighting& sighting);

  UnmanagedAction default_action_;
  UnmanagedPolicy policy_;
  ProcessProbe probe_;
  std::optional<uid_t> only_uid_;
  std::map<pid_t, Entry> recorded_;
  std::map<pid_t, Pending> pending_;
  uint64_t seen_ = 0;
};

}  // namespace gpulimit::server
