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
