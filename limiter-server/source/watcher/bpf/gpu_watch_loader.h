// The user side of gpu_watch.bpf.c, as libbpf-bootstrap's loaders go: open
// the skeleton, set the filters, load, attach, then poll the ring buffer
// from gpulimitd's event loop. Built only with GPULIMIT_BUILD_BPF; the server
// reaches it through watcher.h.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>

#include "gpu_watch_event.h"
#include "gpulimit/server/result.h"

struct gpu_watch;
struct ring_buffer;

namespace gpulimit::server {

class GpuWatchProgram {
 public:
  using EventHandler = std::function<void(const gpu_watch_event&)>;

  // Loads and attaches the programs; events go to `handler` from consume().
  // `server_tgid`'s own opens are never reported. Fails with one line that
  // carries libbpf's last complaint.
  static Result<std::unique_ptr<GpuWatchProgram>> load(pid_t server_tgid, EventHandler handler);
  ~GpuWatchProgram();
  GpuWatchProgram(const GpuWatchProgram&) = delete;
  GpuWatchProgram& operator=(const GpuWatchProgram&) = delete;

  // Readable (epoll) when events wait in the ring buffer.
  int fd() const;
  // Hands every waiting event to the handler; how many.
  int consume();
  // Adds or removes a tenant process (thread group id) in the kernel's map.
  bool track(pid_t pid);
  void untrack(pid_t pid);

 private:
  GpuWatchProgram(gpu_watch* skeleton, EventHandler handler)
      : skeleton_(skeleton), handler_(std::move(handler)) {}
  static int on_event(void* self, void* data, std::size_t size);

  gpu_watch* skeleton_;
  ring_buffer* ring_ = nullptr;
  EventHandler handler_;
};

}  // namespace gpulimit::server
