// The kernel-side watcher: BPF programs (limiter-server/source/watcher/bpf/gpu_watch.bpf.c)
// that tell gpulimitd, through a ring buffer its event loop polls,
//   - when a tenant process exits (sched_process_exit, for the pids it
//     tracks), so its token is reclaimed at once, ahead of its pidfd;
//   - when a process that is not a tenant opens /dev/nvidia* (openat and
//     openat2), so GPU use that bypasses gpulimit is seen.
// Needs root, BTF, tracefs and the initial pid namespace (the kernel's pids
// must be the server's); open() says which one is missing.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gpulimit/server/result.h"

namespace gpulimit::server {

class GpuWatchProgram;  // source/watcher/bpf/gpu_watch_loader.h, with BPF

// Whether this process sees pids as the kernel (BPF, NVML) reports them.
bool runs_in_initial_pid_namespace();

struct WatchEvent {
  enum class Kind { kExit, kOpen } kind = Kind::kOpen;
  pid_t pid = 0;  // the process (thread group)
  uid_t uid = 0;
  gid_t gid = 0;
  // When the process started, in clock ticks since boot, as the 22nd field
  // of /proc/PID/stat: tells the process from a later one with its pid.
  uint64_t start_ticks = 0;
  std::string command;
  std::string path;  // kOpen: the node opened
};

class GpuWatcher {
 public:
  using Handler = std::function<void(const WatchEvent&)>;

  // Loads and attaches the programs, or says in one line why it cannot:
  // built without BPF, not root, no BTF, no tracefs, another pid namespace,
  // or what libbpf said. Events wait in the ring buffer until consumed.
  static Result<std::unique_ptr<GpuWatcher>> open();
  ~GpuWatcher();
  GpuWatcher(const GpuWatcher&) = delete;
  GpuWatcher& operator=(const GpuWatcher&) = delete;

  // Readable when events wait; consume() hands each to `handler`.
  int fd() const;
  void consume(const Handler& handler);
  // A tenant process joined or left; its exits are reported, its opens are not.
  bool track(pid_t pid);
  void untrack(pid_t pid);

 private:
  GpuWatcher() = default;
  std::unique_ptr<GpuWatchProgram> program_;
  const Handler* handler_ = nullptr;  // consume()'s, while it runs
};

}  // namespace gpulimit::server
