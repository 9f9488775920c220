#include "gpu_watch_loader.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "gpu_watch.skel.h"

namespace gpulimit::server {
namespace {

// libbpf explains a failure in its print callback, not in the error code:
// keep its last warning to put in our one line, instead of letting it
// write to stderr.
thread_local std::string last_libbpf_warning;

int keep_libbpf_warning(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char line[512];
  const int written = std::vsnprintf(line, sizeof line, format, args);
  if (written <= 0) return 0;
  std::string text(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  if (!text.empty()) last_libbpf_warning = text;
  return 0;
}

Failure libbpf_failure(const char* step, int error) {
  std::string message = std::string(step) + ": " + std::strerror(error < 0 ? -error : error);
  if (!last_libbpf_warning.empty()) message += " (libbpf: " + last_libbpf_warning + ")";
  return fail(message);
}

}  // namespace

Result<std::unique_ptr<GpuWatchProgram>> GpuWatchProgram::load(pid_t server_tgid,
                                                               EventHandler handler) {
  libbpf_set_print(keep_libbpf_warning);
  last_libbpf_warning.clear();

  gpu_watch* skeleton = gpu_watch__open();
  if (!skeleton) return libbpf_failure("opening the BPF object", errno);
  std::unique_ptr<GpuWatchProgram> program(new GpuWatchProgram(skeleton, std::move(handler)));
  skeleton->rodata->server_tgid = static_cast<__u32>(server_tgid);
  if (int error = gpu_watch__load(skeleton); error != 0)
    return libbpf_failure("loading the BPF programs", error);
  if (int error = gpu_watch__attach(skeleton); error != 0)
    return libbpf_failure("attaching the BPF programs", error);
  program->ring_ = ring_buffer__new(bpf_map__fd(skeleton->maps.events), &GpuWatchProgram::on_event,
                                    program.get(), nullptr);
  if (!program->ring_) return libbpf_failure("opening the ring buffer", errno);
  return program;
}

GpuWatchProgram::~GpuWatchProgram() {
  if (ring_) ring_buffer__free(ring_);
  gpu_watch__destroy(skeleton_);
}

int GpuWatchProgram::fd() const {
  return ring_buffer__epoll_fd(ring_);
}

int GpuWatchProgram::consume() {
  return ring_buffer__consume(ring_);
}

int GpuWatchProgram::on_event(void* self, void* data, std::size_t size) {
  if (size < sizeof(gpu_watch_event)) return 0;
  gpu_watch_event event;
  std::memcpy(&event, data, sizeof event);
  event.comm[sizeof event.comm - 1] = '\0';
  event.path[sizeof event.path - 1] = '\0';
  static_cast<GpuWatchProgram*>(self)->handler_(event);
  return 0;
}

bool GpuWatchProgram::track(pid_t pid) {
  const auto key = static_cast<__u32>(pid);
  const __u8 one = 1;
  return bpf_map__update_elem(skeleton_->maps.tenant_pids, &key, sizeof key, &one, sizeof one,
                              BPF_ANY) == 0;
}

void GpuWatchProgram::untrack(pid_t pid) {
  const auto key = static_cast<__u32>(pid);
  bpf_map__delete_elem(skeleton_->maps.tenant_pids, &key, sizeof key, 0);
}

}  // namespace gpulimit::server
