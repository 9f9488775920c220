// A simulated GPU machine of one test's own: the simulator's libcuda.so.1,
// a fresh state file, so that tests running in parallel never share device
// memory or a device timeline, and a trace of the kernels it executed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workload_process.h"

namespace integration {

// Built by CMake (see CMakeLists.txt).
inline const std::string kAllocator = WORKLOAD_ALLOCATOR_PATH;
inline const std::string kSpinner = WORKLOAD_SPINNER_PATH;
// Test programs of this directory (see forking_tenant.cpp, device_views.cpp).
inline const std::string kForkingTenant = FORKING_TENANT_PATH;
inline const std::string kDeviceViews = DEVICE_VIEWS_PATH;
inline const std::string kLibrary = GPULIMIT_LIBRARY_PATH;

// One line of FAKECUDA_TRACE: "pid device stream start_ns end_ns name".
struct TracedKernel {
  int pid = 0;
  uint32_t device = 0;
  uint64_t stream = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::string name;
};

class SimulatedMachine {
 public:
  // `memory`: FAKECUDA_MEM, the memory of the one device. `context_memory`:
  // FAKECUDA_CTX_MEM, what one context takes of it; none unless a test asks,
  // so that what a test allocates is all a tenant is charged.
  explicit SimulatedMachine(std::string memory = "4G", std::string context_memory = "0");

  // What a workload needs to run on this machine.
  Environment environment() const;
  // What a process of a capped tenant needs on this machine: libgpulimit.so
  // preloaded, ledgers in `ledger_dir`, the tenant `id` and the cap `mem`
  // (each left unset when empty).
  Environment tenant_environment(const std::string& ledger_dir, const std::string& mem,
                                 const std::string& id) const;

  std::vector<TracedKernel> traced_kernels() const;

 private:
  TemporaryDirectory directory_;
  std::string memory_;
  std::string context_memory_;
};

}  // namespace integration
