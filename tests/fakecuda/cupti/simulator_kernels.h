// Where the simulated CUPTI learns what the simulated GPU ran: the kernels
// of this process from the simulator's own trace (FAKECUDA_TRACE), and the
// devices from the simulated driver's API, as the real CUPTI learns them
// from the driver.
#pragma once

#include <cuda.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fakecuda::cupti {

// One line of the simulator's trace.
struct SimulatedKernel {
  uint32_t physical_device = 0;
  uint64_t stream = 0;
  uint64_t start_ns = 0;  // CLOCK_MONOTONIC
  uint64_t end_ns = 0;
  std::string name;
};

// Reads the trace from where it last stopped. Only whole lines count: a
// line being appended is read next time.
class TraceFollower {
 public:
  // The kernels of process `pid` appended since the last call. Says once on
  // stderr, and returns nothing, when FAKECUDA_TRACE is unset or unreadable.
  std::vector<SimulatedKernel> new_kernels_of(pid_t pid);

 private:
  bool opened_ = false;
  int fd_ = -1;
  uint64_t offset_ = 0;  // of the first byte not yet consumed
};

struct SimulatedDevice {
  int ordinal = 0;  // what CUDA (and so CUPTI) calls it
  uint32_t physical = 0;
  CUuuid uuid{};
};

// The devices the driver shows this process, once the program has
// initialised it; empty before (the simulated CUPTI never initialises CUDA
// itself). The physical index is read from the UUID, whose last byte the
// simulator sets to it (tests/fakecuda/README.md).
std::vector<SimulatedDevice> visible_devices();

}  // namespace fakecuda::cupti
