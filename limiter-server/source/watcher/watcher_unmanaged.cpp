#include "gpulimit/server/watcher/watcher_unmanaged.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gpulimit/server/loop/process_descriptor.h"
#include "gpulimit/server/policy/user_accounts.h"
#include "gpulimit/server/watcher/proc_fields.h"

namespace gpulimit::server {
namespace {

std::string proc_path(pid_t pid, const char* entry) {
  return "/proc/" + std::to_string(pid) + "/" + entry;
}

// Field 22 of /proc/PID/stat (starttime); 0 when the process is gone.
uint64_t start_ticks_of(pid_t pid) {
  std::ifstream file(proc_path(pid, "stat"));
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return stat_start_ticks(text);
}

bool maps_gpulimit(pid_t pid) {
  std::ifstream maps(proc_path(pid, "maps"));
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libgpulimit") != std::string::npos) return true;
  return false;
}

bool alive(pid_t pid, uint64_t start_ticks) {
  const uint64_t now_ticks = start_ticks_of(pid);
  return now_ticks != 0 && (start_ticks == 0 || now_ticks == start_ticks);
}

// The pidfd pins the process that has the pid now; if that is a later one
// (the start differs), nothing is sent.
bool kill_process(pid_t pid, uint64_t start_ticks) {
  const int pidfd = pidfd_open(pid);
  if (pidfd < 0) return false;
  bool sent = false;
  if (alive(pid, start_ticks))
    sent = syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) == 0;
  ::close(pidfd);
  return sent;
}

}  // namespace

ProcessProbe machine_process_probe() {
  return ProcessProbe{maps_gpulimit, alive, kill_process, user_name};
}

std::optional<UnmanagedSighting> describe_process(pid_t pid) {
  std::ifstream status_file(proc_path(pid, "status"));
  const std::string status((std::istreambuf_iterator<char>(status_file)),
                           std::istreambuf_iterator<char>());
  const std::optional<unsigned> uid = status_real_id(status, "Uid:");
  const std::optional<unsigned> gid = status_real_id(status, "Gid:");
  const uint64_t start = start_ticks_of(pid);
  if (!uid || !gid || start == 0) return std::nullopt;
  UnmanagedSighting sighting;
  sighting.pid = pid;
  sighting.uid = *uid;
  sighting.gid = *gid;
  sighting.start_ticks = start;
  std::ifstream comm(proc_path(pid, "comm"));
  std::getline(comm, sighting.command);
  return sighting;
}

UnmanagedProcesses::UnmanagedProcesses(const WatcherConfig& config, ProcessProbe probe,
                                       std::optional<uid_t> only_uid)
    : default_action_(config.unmanaged_default),
      policy_(config.unmanaged_policy),
      probe_(std::move(probe)),
      only_uid_(only_uid) {}

UnmanagedAction UnmanagedProcesses::action_for(uid_t uid, gid_t gid) const {
  return policy_ ? policy_(uid, gid) : default_action_;
}

void UnmanagedProcesses::sighted(const UnmanagedSighting& sighting, TimeNs now) {
  if (only_uid_ && sighting.uid != *only_uid_) return;
  const auto known = recorded_.find(sighting.pid);
  if (known != recorded_.end()) {
    // The same process again (another node, another device): said once.
    if (sighting.start_ticks == 0 || known->second.sighting.start_ticks == 0 ||
        known->second.sighting.start_ticks == sighting.start_ticks)
      return;
    recorded_.erase(known);  // its pid now belongs to a later process
  }
  if (pending_.contains(sighting.pid)) return;
  if (probe_.maps_gpulimit(sighting.pid)) {
    pending_[sighting.pid] = Pending{sighting, now + kJoinGraceNs};
    return;
  }
  record(sighting);
}

void UnmanagedProcesses::joined(pid_t pid) {
  pending_.erase(pid);
  recorded_.erase(pid);
}

void UnmanagedProcesses::advance(TimeNs now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.due > now) {
      ++it;
      continue;
    }
    const UnmanagedSighting sighting = it->second.sighting;
    it = pending_.erase(it);
    if (probe_.alive(sighting.pid, sighting.start_ticks)) record(sighting);
  }
}

std::optional<TimeNs> UnmanagedProcesses::next_deadline() const {
  std::optional<TimeNs> earliest;
  for (const auto& [pid, pending] : pending_)
    earliest = std::min(earliest.value_or(pending.due), pending.due);
  return earliest;
}

void UnmanagedProcesses::forget_gone() {
  std::erase_if(recorded_, [this](const auto& item) {
    return !probe_.alive(item.first, item.second.sighting.start_ticks);
  });
}

void UnmanagedProcesses::record(const UnmanagedSighting& sighting) {
  Entry entry;
  entry.sighting = sighting;
  entry.action = action_for(sighting.uid, sighting.gid);
  entry.user = probe_.user_name(sighting.uid);
  ++seen_;
  const std::string who = "pid " + std::to_string(sighting.pid) + " (" + sighting.command +
                          ", user " + entry.user + ", uid " + std::to_string(sighting.uid) + ")";
  switch (entry.action) {
    case UnmanagedAction::kAllow:
      spdlog::debug("unmanaged GPU process {} uses {}; allowed", who, sighting.device);
      break;
    case UnmanagedAction::kWarn:
      spdlog::warn("unmanaged GPU process {} uses {} without gpulimit", who, sighting.device);
      break;
    case UnmanagedAction::kKill:
      if (probe_.kill(sighting.pid, sighting.start_ticks)) {
        spdlog::warn("unmanaged GPU process {} uses {} without gpulimit; killed (SIGKILL)", who,
                     sighting.device);
      } else {
        spdlog::warn("unmanaged GPU process {} uses {} without gpulimit; could not kill it", who,
                     sighting.device);
      }
      break;
  }
  recorded_[sighting.pid] = std::move(entry);
}

std::vector<UnmanagedProcess> UnmanagedProcesses::list() const {
  std::vector<UnmanagedProcess> processes;
  for (const auto& [pid, entry] : recorded_)
    processes.push_back(UnmanagedProcess{pid, entry.sighting.uid, entry.user,
                                         entry.sighting.command, entry.sighting.device,
                                         entry.action});
  return processes;
}

}  // namespace gpulimit::server
