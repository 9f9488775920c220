// The physical index (NVML's, nvidia-smi's) of the device with a UUID.
#pragma once

#include <cstdint>
#include <optional>

namespace gpulimit::cupti_trace {

// NVML's index of the device `uuid` ("GPU-..."); none when NVML cannot be
// loaded or does not know the UUID. NVML is loaded with dlopen on first use
// and stays loaded.
std::optional<uint32_t> physical_index_of(const char* uuid);

}  // namespace gpulimit::cupti_trace
