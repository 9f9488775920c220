#include "library.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

// A handle is the address of one of these. index_of() derives the index from
// the address, which it has to validate anyway; the field is for debuggers.
struct nvmlDevice_st {
  uint32_t index;
};

namespace fakecuda::nvml {
namespace {

// One per possible device, so that a handle stays valid for the life of the
// process, across shutdown and init.
constinit std::array<nvmlDevice_st, kMaxDevices> g_handles = [] {
  std::array<nvmlDevice_st, kMaxDevices> handles{};
  for (uint32_t i = 0; i < kMaxDevices; ++i)
    handles[i].index = i;
  return handles;
}();

// Guards the first load and the reference count's transitions; the device
// calls only read g_users.
std::mutex g_init_mutex;
std::atomic<uint32_t> g_users{0};
// Written once, under g_init_mutex, before g_users first becomes non-zero;
// readers see them through the acquire load in initialised().
SharedState* g_state = nullptr;
MachineConfig g_machine;

void report(const std::string& error) {
  std::fprintf(stderr, "fakecuda: nvmlInit failed: %s\n", error.c_str());
}

// Loads the configuration and maps the shared state; false, after one line on
// stderr, when either is unusable. Called with g_init_mutex held.
bool load_machine() {
  Config config;
  std::string error;
  if (!load_config(config, error)) {
    report(error);
    return false;
  }
  // NVML holds no device memory, so it maps the state without attaching: it
  // only reads what the processes using libcuda have charged.
  SharedState* state = SharedState::open(config.process.state_path, config.machine, error);
  if (!state) {
    report(error.empty() ? "out of memory mapping " + config.process.state_path : error);
    return false;
  }
  g_machine = config.machine;
  g_state = state;
  return true;
}

}  // namespace

nvmlReturn_t init(unsigned int flags) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  // A failed load is not remembered: the next init tries again.
  if (!g_state && !load_machine()) return NVML_ERROR_UNKNOWN;
  // NVML documents that init fails without GPUs unless NO_GPUS is given; the
  // code is inferred from nvidia-smi's "No supported GPUs were found".
  if (g_machine.device_count == 0 && !(flags & NVML_INIT_FLAG_NO_GPUS))
    return NVML_ERROR_GPU_NOT_FOUND;
  g_users.fetch_add(1, std::memory_order_release);
  return NVML_SUCCESS;
}

nvmlReturn_t shutdown() {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (g_users.load(std::memory_order_relaxed) == 0) return NVML_ERROR_UNINITIALIZED;
  g_users.fetch_sub(1, std::memory_order_relaxed);
  return NVML_SUCCESS;
}

bool initialised() {
  return g_users.load(std::memory_order_acquire) > 0;
}

const MachineConfig& machine() {
  return g_machine;
}

SharedState& shared_state() {
  return *g_state;
}

nvmlDevice_t handle_of(uint32_t index) {
  return &g_handles[index];
}

nvmlReturn_t index_of(nvmlDevice_t device, uint32_t& index) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  // Compared as integers: a caller's garbage pointer is not part of
  // g_handles, and ordering unrelated pointers is unspecified in C++.
  const auto address = reinterpret_cast<uintptr_t>(device);
  const auto first = reinterpret_cast<uintptr_t>(g_handles.data());
  const uintptr_t offset = address - first;
  if (address < first || offset % sizeof(nvmlDevice_st) != 0) return NVML_ERROR_INVALID_ARGUMENT;
  const uintptr_t slot = offset / sizeof(nvmlDevice_st);
  if (slot >= g_machine.device_count) return NVML_ERROR_INVALID_ARGUMENT;
  index = static_cast<uint32_t>(slot);
  return NVML_SUCCESS;
}

nvmlReturn_t copy_string(std::string_view text, char* out, unsigned int length) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() >= length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
  return NVML_SUCCESS;
}

}  // namespace fakecuda::nvml
