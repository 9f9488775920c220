#include "gpulimit/server/loop/ledger_reaper.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gpulimit/server/loop/process_descriptor.h"
#include "gpulimit/server/policy/limits_policy.h"
#include "gpulimit/shm/ledger_inspection.h"

namespace gpulimit::server {
namespace {

// The child's exit status says how the reap went.
enum ChildExit : int {
  kExitReaped = 0,
  kExitBusy = 10,
  kExitAbsent = 11,
  kExitUnusable = 12,
  kExitNoPrivileges = 13,
};

void write_line(int fd, const std::string& text) {
  [[maybe_unused]] const ssize_t written = ::write(fd, text.data(), text.size());
}

// What the recount gave back, per device, as "GPU-11223344 512M, ...";
// empty when nothing. Live processes may free memory meanwhile too: the
// figure is what the tenant's use fell by.
std::string bytes_given_back(const std::string& path, uid_t owner,
                             const std::vector<shm::LedgerDeviceUsage>& before) {
  std::vector<shm::LedgerDeviceUsage> after;
  std::string error;
  if (!shm::read_ledger_usage(path, owner, after, error)) return "";
  std::string given_back;
  for (const shm::LedgerDeviceUsage& now : after) {
    for (const shm::LedgerDeviceUsage& then : before) {
      if (then.uuid != now.uuid || then.used <= now.used) continue;
      char uuid[16];
      std::snprintf(uuid, sizeof uuid, "%02x%02x%02x%02x", now.uuid[0], now.uuid[1], now.uuid[2],
                    now.uuid[3]);
      given_back += (given_back.empty() ? "GPU-" : ", GPU-") + std::string(uuid) + " " +
                    format_size(then.used - now.used);
    }
  }
  return given_back;
}

// Runs in the child: nothing here returns.
[[noreturn]] void reap_in_child(const std::string& path, uid_t owner, gid_t group, int message_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (geteuid() == 0 && owner != 0) {
    if (setgroups(0, nullptr) != 0 || setgid(group) != 0 || setuid(owner) != 0) {
      write_line(message_fd, std::string("cannot take uid ") + std::to_string(owner) + ": " +
                                 std::strerror(errno));
      _exit(kExitNoPrivileges);
    }
  }
  std::string error;
  std::vector<shm::LedgerDeviceUsage> before;
  const bool counted = shm::read_ledger_usage(path, owner, before, error);
  switch (shm::reap_ledger(path, owner, error)) {
    case shm::LedgerReapOutcome::kReaped:
      if (counted) write_line(message_fd, bytes_given_back(path, owner, before));
      _exit(kExitReaped);
    case shm::LedgerReapOutcome::kBusy:
      write_line(message_fd, error);
      _exit(kExitBusy);
    case shm::LedgerReapOutcome::kAbsent:
      _exit(kExitAbsent);
    case shm::LedgerReapOutcome::kUnusable:
      write_line(message_fd, error);
      _exit(kExitUnusable);
  }
  _exit(kExitUnusable);
}

std::string read_message(int fd) {
  char text[512];
  const ssize_t got = ::read(fd, text, sizeof text - 1);
  return got > 0 ? std::string(text, static_cast<size_t>(got)) : std::string();
}

}  // namespace

LedgerReaper::~LedgerReaper() {
  // Children die with the server (PR_SET_PDEATHSIG); an interrupted recount
  // is finished by the tenant's next reaper (tenant_ledger.cpp, I4).
  for (auto& [path, job] : jobs_)
    forget_child(job);
}

void LedgerReaper::request(const std::string& path, uid_t owner, gid_t group, TimeNs now,
                           pid_t dead_pid) {
  const auto [found, created] = jobs_.try_emplace(path);
  Job& job = found->second;
  if (dead_pid > 0) job.dead_pids.push_back(dead_pid);
  if (created) {
    job.owner = owner;
    job.group = group;
    job.due = now;
  } else if (job.child > 0) {
    job.again = true;
  } else {
    job.due = std::min(job.due, now);
    job.attempts = 0;
  }
  advance(now);
}

void LedgerReaper::advance(TimeNs now) {
  for (auto& [path, job] : jobs_) {
    if (job.child > 0) {
      if (now - job.started_at >= kReapChildTimeoutNs) {
        spdlog::warn("ledger {}: its reaper (pid {}) ran for {} s; killing it", path, job.child,
                     kReapChildTimeoutNs / 1'000'000'000);
        ::kill(job.child, SIGKILL);   // the pidfd reports it; finished() cleans up
        job.started_at = kNever / 2;  // kill once
      }
    } else if (job.due <= now) {
      start(path, job, now);
    }
  }
  std::erase_if(jobs_, [](const auto& entry) {
    return entry.second.child < 0 && entry.second.due == kNever;
  });
}

std::optional<TimeNs> LedgerReaper::next_deadline() const {
  std::optional<TimeNs> earliest;
  for (const auto& [path, job] : jobs_) {
    const TimeNs at = job.child > 0 ? job.started_at + kReapChildTimeoutNs : job.due;
    earliest = std::min(earliest.value_or(at), at);
  }
  return earliest;
}

void LedgerReaper::start(const std::string& path, Job& job, TimeNs now) {
  int message[2];
  if (pipe2(message, O_CLOEXEC | O_NONBLOCK) != 0) {
    spdlog::warn("ledger {}: cannot start its reaper: pipe: {}", path, std::strerror(errno));
    job.due = now + kReapRetryDelayNs;
    return;
  }
  const pid_t child = fork();
  if (child == 0) {
    ::close(message[0]);
    reap_in_child(path, job.owner, job.group, message[1]);
  }
  ::close(message[1]);
  if (child < 0) {
    spdlog::warn("ledger {}: cannot start its reaper: fork: {}", path, std::strerror(errno));
    ::close(message[0]);
    job.due = now + kReapRetryDelayNs;
    return;
  }
  job.child = child;
  job.reaping_pids.insert(job.reaping_pids.end(), job.dead_pids.begin(), job.dead_pids.end());
  job.dead_pids.clear();
  job.message_fd = message[0];
  job.started_at = now;
  job.pidfd = pidfd_open(child);
  Result<EventLoop::WatchId> watch =
      job.pidfd >= 0 ? loop_.watch(job.pidfd, EPOLLIN, [this, path](uint32_t) { finished(path); })
                     : Result<EventLoop::WatchId>(fail(std::strerror(errno)));
  if (!watch) {
    // Without a pidfd the loop cannot learn of its end: wait for it here
    // (a reap takes microseconds) and leave any retry to the tenant.
    spdlog::warn("ledger {}: cannot watch its reaper ({}); waiting for it", path, watch.error());
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    forget_child(job);
    job.due = kNever;  // done: advance() drops it
    return;
  }
  job.watch = *watch;
}

void LedgerReaper::forget_child(Job& job) {
  if (job.watch) loop_.unwatch(job.watch);
  if (job.pidfd >= 0) ::close(job.pidfd);
  if (job.message_fd >= 0) ::close(job.message_fd);
  job.watch = 0;
  job.pidfd = -1;
  job.message_fd = -1;
  job.child = -1;
}

void LedgerReaper::finished(const std::string& path) {
  const auto found = jobs_.find(path);
  if (found == jobs_.end()) return;
  Job& job = found->second;
  const TimeNs now = EventLoop::now();
  int status = 0;
  pid_t waited;
  do {
    waited = waitpid(job.child, &status, 0);
  } while (waited < 0 && errno == EINTR);
  const std::string message = read_message(job.message_fd);
  const double took_ms = static_cast<double>(now - job.started_at) / 1e6;
  forget_child(job);

  const int code = waited > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  bool retry = false;
  switch (code) {
    case kExitReaped:
      ++reaps_done_;
      if (!message.empty()) {
        std::string pids;
        for (const pid_t pid : job.reaping_pids)
          pids += (pids.empty() ? "" : ",") + std::to_string(pid);
        spdlog::info("ledger {}: {} given back after the exit of pid {} ({:.2f} ms)", path, message,
                     pids.empty() ? std::string("unknown") : pids, took_ms);
      } else {
        spdlog::debug("ledger {}: dead processes reaped ({:.2f} ms)", path, took_ms);
      }
      job.reaping_pids.clear();
      break;
    case kExitAbsent:
      spdlog::debug("ledger {}: gone; nothing to reap", path);
      break;
    case kExitBusy:
      retry = ++job.attempts < kReapAttempts;
      if (!retry)
        spdlog::warn("ledger {}: still busy after {} tries ({}); leaving the reap to the tenant",
                     path, kReapAttempts, message);
      break;
    case kExitUnusable:
    case kExitNoPrivileges:
      spdlog::warn("ledger {}: cannot reap: {}", path, message);
      break;
    default:
      spdlog::warn("ledger {}: its reaper ended abnormally (status {:#x})", path, status);
      break;
  }
  if (retry) {
    job.due = now + kReapRetryDelayNs;
  } else if (job.again) {
    job.again = false;
    job.attempts = 0;
    job.due = now;
  } else {
    jobs_.erase(found);
    return;
  }
  advance(now);
}

}  // namespace gpulimit::server
