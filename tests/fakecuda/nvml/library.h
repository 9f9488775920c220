// What every entry point of the simulated NVML stands on: the init reference
// count, the machine NVML enumerates, the shared state that says which
// memory is in use, and the device handles NVML hands out.
#pragma once

#include <cstdint>
#include <string_view>

#include "config.h"
#include "nvml_device_queries.h"
#include "shared_state.h"

// The library is built with hidden visibility and a version script that
// exports nvml*: an entry point needs both to be visible.
#define FAKECUDA_NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace fakecuda::nvml {

// Reads FAKECUDA_* and maps the shared state on the first successful call of
// the process (the mapping then stays for the life of the process, so a call
// racing with nvmlShutdown never touches freed state), then counts one more
// user. A broken configuration gives NVML_ERROR_UNKNOWN and one line on
// stderr; a machine without GPUs gives NVML_ERROR_GPU_NOT_FOUND unless
// `flags` has NVML_INIT_FLAG_NO_GPUS.
nvmlReturn_t init(unsigned int flags);
// NVML_ERROR_UNINITIALIZED when there is no user left to count down.
nvmlReturn_t shutdown();
bool initialised();

// Valid once initialised() has returned true.
const MachineConfig& machine();
SharedState& shared_state();

// The handle of physical device `index`; `index` must be below device_count.
nvmlDevice_t handle_of(uint32_t index);
// The check every device call starts with: NVML_ERROR_UNINITIALIZED before
// init, NVML_ERROR_INVALID_ARGUMENT for anything that is not a handle of
// this machine's devices.
nvmlReturn_t index_of(nvmlDevice_t device, uint32_t& index);

// Copies `text` and its terminating NUL into out[0, length), the contract of
// NVML's string getters: NVML_ERROR_INVALID_ARGUMENT for a NULL buffer,
// NVML_ERROR_INSUFFICIENT_SIZE (nothing written) when it does not fit.
nvmlReturn_t copy_string(std::string_view text, char* out, unsigned int length);

}  // namespace fakecuda::nvml
