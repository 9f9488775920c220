// The simulated machine: what the environment asks for (FAKECUDA_*), parsed
// once per process. Every process attached to one state file must ask for the
// same machine; see SharedState::open.
#pragma once

#include <cstdint>
#include <string>

namespace fakecuda {

inline constexpr uint32_t kMaxDevices = 16;

struct DeviceConfig {
  uint64_t total_mem = 0;    // bytes of device memory
  uint64_t context_mem = 0;  // bytes a new context takes from the device
  uint32_t sm_count = 0;
  uint32_t cc_major = 0;
  uint32_t cc_minor = 0;
  uint32_t clock_khz = 0;       // SM clock (CU_DEVICE_ATTRIBUTE_CLOCK_RATE, NVML's max SM clock)
  uint32_t mem_clock_khz = 0;   // peak memory clock
  uint32_t bus_width_bits = 0;  // global memory bus width
  char name[64] = {};
  char uuid[16] = {};  // derived from the index; stable across runs
};

// Fixed-width and trivially copyable: it is stored in the shared state file
// and compared byte for byte between processes.
struct MachineConfig {
  uint32_t device_count = 0;
  uint32_t driver_version = 0;  // what cuDriverGetVersion reports
  DeviceConfig devices[kMaxDevices];

  bool operator==(const MachineConfig& other) const;
};

// Per-process options that do not describe the machine.
struct ProcessOptions {
  std::string state_path;             // FAKECUDA_STATE
  std::string trace_path;             // FAKECUDA_TRACE ("" = off)
  uint64_t default_kernel_ns = 0;     // FAKECUDA_KERNEL_NS: a kernel's base duration
  uint64_t kernel_ns_per_wave = 0;    // FAKECUDA_KERNEL_NS_PER_WAVE: plus this per wave of blocks
  bool eager_module_loading = false;  // CUDA_MODULE_LOADING=EAGER
  uint64_t launch_delay_ns = 0;       // FAKECUDA_LAUNCH_DELAY_NS
  std::string visible_devices;        // CUDA_VISIBLE_DEVICES (raw)
  bool visible_devices_set = false;
};

struct Config {
  MachineConfig machine;
  ProcessOptions process;
};

// Reads FAKECUDA_* from the environment. On a malformed value returns false
// and sets `error` to one line naming the variable.
bool load_config(Config& out, std::string& error);

// Formats a UUID the way NVML and nvidia-smi print it: GPU-xxxxxxxx-xxxx-...
std::string format_uuid(const char (&uuid)[16]);

}  // namespace fakecuda
