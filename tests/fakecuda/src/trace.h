// FAKECUDA_TRACE: one line per executed kernel, appended by every process,
//   <pid> <device> <stream> <start_ns> <end_ns> <name>
// with the physical device index and CLOCK_MONOTONIC times. The format is
// gpulimit's kernel-trace format (tools/trace), shared with the real-GPU tracer.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace fakecuda {

class Tracer {
 public:
  explicit Tracer(const std::string& path);
  bool enabled() const { return fd_ >= 0; }
  void kernel(uint32_t device, uint64_t stream, uint64_t start_ns, uint64_t end_ns,
              const std::string& name);

 private:
  int fd_ = -1;
  pid_t pid_;
};

}  // namespace fakecuda
