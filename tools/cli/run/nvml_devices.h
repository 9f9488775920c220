// The machine's GPUs, asked of NVML (libnvidia-ml.so.1, loaded at run time:
// gpulimit itself must start on machines without a driver).
#pragma once

#include <string>
#include <vector>

namespace gpulimit::cli {

// The UUID of every GPU NVML lists, in NVML index order. NVML ignores
// CUDA_VISIBLE_DEVICES: this is the whole machine (or container). False with
// `error` set to one line when NVML cannot be loaded or fails.
bool list_gpus(std::vector<std::string>& uuids, std::string& error);

}  // namespace gpulimit::cli
