#include "simulated_machine.h"

#include <fstream>
#include <sstream>

namespace integration {

SimulatedMachine::SimulatedMachine(std::string memory, std::string context_memory)
    : memory_(std::move(memory)), context_memory_(std::move(context_memory)) {}

Environment SimulatedMachine::environment() const {
  return {
      {"LD_LIBRARY_PATH", FAKECUDA_LIB_DIR},
      {"FAKECUDA_STATE", directory_.path() + "/state"},
      {"FAKECUDA_TRACE", directory_.path() + "/trace"},
      {"FAKECUDA_DEVICES", "1"},
      {"FAKECUDA_MEM", memory_},
      {"FAKECUDA_CTX_MEM", context_memory_},
  };
}

Environment SimulatedMachine::tenant_environment(const std::string& ledger_dir,
                                                 const std::string& mem,
                                                 const std::string& id) const {
  Environment env = with(environment(), "LD_PRELOAD", kLibrary);
  // In a sanitized build the preloaded library precedes the runtime.
  env = with(env, "ASAN_OPTIONS", "verify_asan_link_order=0");
  env = with(env, "GPULIMIT_LEDGER_DIR", ledger_dir);
  if (!id.empty()) env = with(env, "GPULIMIT_TENANT", id);
  if (!mem.empty()) env = with(env, "GPULIMIT_MEM", mem);
  return env;
}

std::vector<TracedKernel> SimulatedMachine::traced_kernels() const {
  std::vector<TracedKernel> kernels;
  std::ifstream trace(directory_.path() + "/trace");
  for (std::string line; std::getline(trace, line);) {
    std::istringstream fields(line);
    TracedKernel kernel;
    if (fields >> kernel.pid >> kernel.device >> kernel.stream >> kernel.start_ns >>
        kernel.end_ns >> kernel.name) {
      kernels.push_back(kernel);
    }
  }
  return kernels;
}

}  // namespace integration
