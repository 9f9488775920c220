// A simulated GPU machine of one test's own: the simulator's libcuda.so.1
// and libnvidia-ml.so.1, a fresh state file, so that tests running in
// parallel never share device memory or a device timeline, and a trace of
// the kernels it executed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpulimit/testing/process.h"
#include "gpulimit/testing/temporary_directory.h"

namespace gpulimit::testing {

// One line of FAKECUDA_TRACE: "pid device stream start_ns end_ns name".
struct TracedKernel {
  int pid = 0;
  uint32_t device = 0;
  uint64_t stream = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::string name;
};

// What the machine has.
struct MachineShape {
  uint32_t devices = 1;  // FAKECUDA_DEVICES
  // FAKECUDA_MEM, the memory of each device; the simulator's default when
  // empty.
  std::string memory = "4G";
  // FAKECUDA_CTX_MEM, what one context takes of it: none unless a test asks,
  // so that what a test allocates is all a tenant is charged; the
  // simulator's default when empty.
  std::string context_memory = "0";
};

class SimulatedMachine {
 public:
  explicit SimulatedMachine(MachineShape shape = {});
  SimulatedMachine(std::string memory, std::string context_memory = "0");

  // Its own directory (the state file and the trace are there).
  const std::string& directory() const { return directory_.path(); }
  std::string state_path() const { return directory_.path() + "/state"; }
  std::string trace_path() const { return directory_.path() + "/trace"; }

  // What a program needs to run on this machine.
  Variables environment() const;
  // The same as NAME=value assignments, for a child's whole environment.
  std::vector<std::string> assignments() const;
  // What a process of a capped tenant needs on this machine: libgpulimit.so
  // preloaded, ledgers in `ledger_dir`, the tenant `id` and the cap `mem`
  // (each left unset when empty).
  Variables tenant_environment(const std::string& ledger_dir, const std::string& mem,
                               const std::string& id) const;

  // Every kernel the machine executed so far, in the order they ended.
  std::vector<TracedKernel> traced_kernels() const;
  // Those of process `pid`.
  std::vector<TracedKernel> traced_kernels(pid_t pid) const;

 private:
  TemporaryDirectory directory_;
  MachineShape shape_;
};

// NAME=value assignments of `variables`, in order.
std::vector<std::string> assignments(const Variables& variables);

}  // namespace gpulimit::testing
