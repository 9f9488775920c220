#include "gpulimit/server/watcher/watcher.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#if GPULIMIT_HAVE_BPF
#include "bpf/gpu_watch_loader.h"
#endif

namespace gpulimit::server {

#if !GPULIMIT_HAVE_BPF
// Nothing to hold: open() fails before one would be made.
class GpuWatchProgram {};
#endif

namespace {

#if GPULIMIT_HAVE_BPF
bool exists(const char* path) {
  struct stat info {};
  return ::stat(path, &info) == 0;
}
#endif

// Why the watcher cannot run here, or "" when it may try.
std::string missing_precondition() {
#if !GPULIMIT_HAVE_BPF
  return "gpulimitd was built without it (GPULIMIT_BUILD_BPF=OFF, or clang, bpftool or libbpf "
         "missing at build time)";
#else
  if (::geteuid() != 0) return "not running as root (loading BPF programs needs it)";
  if (!exists("/sys/kernel/btf/vmlinux"))
    return "the kernel has no BTF (/sys/kernel/btf/vmlinux), which the CO-RE programs need";
  if (!exists("/sys/kernel/tracing/events/syscalls") &&
      !exists("/sys/kernel/debug/tracing/events/syscalls"))
    return "tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)";
  if (!runs_in_initial_pid_namespace())
    return "gpulimitd runs in a pid namespace of its own, so the kernel's pids are not its pids";
  return "";
#endif
}

}  // namespace

bool runs_in_initial_pid_namespace() {
  // The inode number of the initial pid namespace (PROC_PID_INIT_INO),
  // which the kernel never changes.
  constexpr ino_t kInitialPidNamespace = 0xEFFFFFFC;
  struct stat info {};
  return ::stat("/proc/self/ns/pid", &info) == 0 && info.st_ino == kInitialPidNamespace;
}

GpuWatcher::~GpuWatcher() = default;

#if GPULIMIT_HAVE_BPF

Result<std::unique_ptr<GpuWatcher>> GpuWatcher::open() {
  if (const std::string missing = missing_precondition(); !missing.empty()) return fail(missing);
  std::unique_ptr<GpuWatcher> watcher(new GpuWatcher());
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  const uint64_t ns_per_tick =
      ticks_per_second > 0 ? 1'000'000'000ull / static_cast<uint64_t>(ticks_per_second) : 1;
  auto forward = [self = watcher.get(), ns_per_tick](const gpu_watch_event& raw) {
    if (!self->handler_) return;
    WatchEvent event;
    event.kind = raw.kind == GPU_WATCH_EXIT ? WatchEvent::Kind::kExit : WatchEvent::Kind::kOpen;
    event.pid = static_cast<pid_t>(raw.pid);
    event.uid = raw.uid;
    event.gid = raw.gid;
    // /proc/PID/stat rounds start_boottime down to ticks the same way.
    event.start_ticks = raw.start_boottime / ns_per_tick;
    event.command = raw.comm;
    event.path = raw.path;
    (*self->handler_)(event);
  };
  Result<std::unique_ptr<GpuWatchProgram>> program =
      GpuWatchProgram::load(::getpid(), std::move(forward));
  if (!program) return fail(program.error());
  watcher->program_ = std::move(*program);
  return watcher;
}

int GpuWatcher::fd() const {
  return program_->fd();
}
void GpuWatcher::consume(const Handler& handler) {
  handler_ = &handler;
  program_->consume();
  handler_ = nullptr;
}
bool GpuWatcher::track(pid_t pid) {
  return program_->track(pid);
}
void GpuWatcher::untrack(pid_t pid) {
  program_->untrack(pid);
}

#else

Result<std::unique_ptr<GpuWatcher>> GpuWatcher::open() {
  return fail(missing_precondition());
}
int GpuWatcher::fd() const {
  return -1;
}
void GpuWatcher::consume(const Handler& /*handler*/) {}
bool GpuWatcher::track(pid_t /*pid*/) {
  return false;
}
void GpuWatcher::untrack(pid_t /*pid*/) {}

#endif

}  // namespace gpulimit::server
