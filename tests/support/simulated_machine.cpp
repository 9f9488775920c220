#include "gpulimit/testing/simulated_machine.h"

#include <fstream>
#include <sstream>

namespace gpulimit::testing {

SimulatedMachine::SimulatedMachine(MachineShape shape) : shape_(std::move(shape)) {}

SimulatedMachine::SimulatedMachine(std::string memory, std::string context_memory)
    : SimulatedMachine(MachineShape{1, std::move(memory), std::move(context_memory)}) {}

Variables SimulatedMachine::environment() const {
  Variables env = {
      {"LD_LIBRARY_PATH", FAKECUDA_LIB_DIR},
      {"FAKECUDA_STATE", state_path()},
      {"FAKECUDA_TRACE", trace_path()},
      {"FAKECUDA_DEVICES", std::to_string(shape_.devices)},
  };
  if (!shape_.memory.empty()) env.emplace_back("FAKECUDA_MEM", shape_.memory);
  if (!shape_.context_memory.empty()) env.emplace_back("FAKECUDA_CTX_MEM", shape_.context_memory);
  return env;
}

std::vector<std::string> SimulatedMachine::assignments() const {
  return testing::assignments(environment());
}

Variables SimulatedMachine::tenant_environment(const std::string& ledger_dir,
                                               const std::string& mem,
                                               const std::string& id) const {
  Variables env = with(environment(), "LD_PRELOAD", GPULIMIT_LIBRARY_PATH);
  // In a sanitized build the preloaded library precedes the runtime.
  env = with(env, "ASAN_OPTIONS", "verify_asan_link_order=0");
  env = with(env, "GPULIMIT_LEDGER_DIR", ledger_dir);
  if (!id.empty()) env = with(env, "GPULIMIT_TENANT", id);
  if (!mem.empty()) env = with(env, "GPULIMIT_MEM", mem);
  return env;
}

std::vector<TracedKernel> SimulatedMachine::traced_kernels() const {
  std::vector<TracedKernel> kernels;
  std::ifstream trace(trace_path());
  for (std::string line; std::getline(trace, line);) {
    std::istringstream fields(line);
    TracedKernel kernel;
    if (fields >> kernel.pid >> kernel.device >> kernel.stream >> kernel.start_ns >>
        kernel.end_ns) {
      fields >> kernel.name;
      kernels.push_back(kernel);
    }
  }
  return kernels;
}

std::vector<TracedKernel> SimulatedMachine::traced_kernels(pid_t pid) const {
  std::vector<TracedKernel> kernels;
  for (TracedKernel& kernel : traced_kernels())
    if (kernel.pid == pid) kernels.push_back(std::move(kernel));
  return kernels;
}

std::vector<std::string> assignments(const Variables& variables) {
  std::vector<std::string> result;
  for (const auto& [name, value] : variables)
    result.push_back(name + "=" + value);
  return result;
}

}  // namespace gpulimit::testing
