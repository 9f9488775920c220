// Contexts: the device memory a context takes when it is created (the
// driver's own tables, the local-memory reserve for the threads the device
// can run, the printf FIFO and the default device malloc heap): hundreds of
// MiB on a large GPU. The driver does not say how much, and cuMemGetInfo
// needs a context, so gpulimit measures it when this process creates its
// first context on a capped device: what NVML says this process holds on the
// device afterwards (it held nothing there before), or, where NVML does not
// list the process under its pid (inside a pid namespace NVML's pids are the
// host's), the drop in the device's free memory across the creation; either
// clamped to [0, total]. From then on every
// context of this process on that device is charged that footprint, reserved
// against the cap before the driver creates it: each cuCtxCreate context
// until cuCtxDestroy, and the primary context once while it is retained
// (from the retain that creates it to the release or reset that destroys it,
// however many retains come between). Over the cap, creation returns
// CUDA_ERROR_OUT_OF_MEMORY and leaves no context behind.
//
// What this is not: exact when another thread of this process allocates on
// the device while its first context is created (or, measured by the drop in
// free memory, when anything else on the machine allocates or frees there
// meanwhile: that change is taken for the context's), or for later contexts (a process's first
// context usually takes more than the next ones). Where NVML cannot be loaded or cannot find the
// device, gpulimit says so once and charges what one more context takes by the driver's own
// account (footprint_by_free_drop). Modules and the heaps that cuCtxSetLimit grows are not counted.
// docs/memory-accounting.md has the whole list.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gate/launch_gate.h"
#include "gpulimit/nvidia/nvml_library.h"
#include "gpulimit/options/values.h"
#include "memory/accounting.h"

using namespace gpulimit;

namespace {

using nvidia::NvmlFunctions;

// NVML, for the device's free memory without a context: loaded and
// initialised once, the first time a context is measured, and kept
// initialised (NVML counts initialisations; the program's own nvmlShutdown
// leaves ours in place). nullptr when NVML cannot be loaded or initialised,
// or lacks nvmlDeviceGetHandleByUUID or nvmlDeviceGetMemoryInfo (the list of
// processes may be absent).
const NvmlFunctions* nvml() {
  static const NvmlFunctions* ready = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    const NvmlFunctions* loaded = nvidia::load_nvml();
    if (loaded && loaded->nvmlInit_v2 && loaded->nvmlDeviceGetHandleByUUID &&
        loaded->nvmlDeviceGetMemoryInfo && loaded->nvmlInit_v2() == NVML_SUCCESS)
      ready = loaded;
  });
  return ready;
}

// NVML's handle of CUDA device `dev`, found by UUID (NVML numbers devices
// its own way), or nullptr.
nvmlDevice_t nvml_device(CUdevice dev) {
  const NvmlFunctions* n = nvml();
  auto get_uuid = real_function(real::cuDeviceGetUuid_v2);
  CUuuid uuid{};
  if (!n || !get_uuid || get_uuid(&uuid, dev) != CUDA_SUCCESS) return nullptr;
  options::DeviceUuid bytes;
  std::memcpy(bytes.data(), uuid.bytes, bytes.size());
  std::string text = options::format_device_uuid(bytes);  // GPU-...
  // A MIG instance has a UUID of its own, which NVML writes as MIG-...
  for (const char* prefix : {"GPU-", "MIG-"}) {
    text.replace(0, 4, prefix);
    nvmlDevice_t device = nullptr;
    if (n->nvmlDeviceGetHandleByUUID(text.c_str(), &device) == NVML_SUCCESS) return device;
  }
  return nullptr;
}

bool device_memory(nvmlDevice_t device, nvmlMemory_t* memory) {
  // A device comes from nvml_device(), so NVML is ready.
  return device && nvml()->nvmlDeviceGetMemoryInfo(device, memory) == NVML_SUCCESS;
}

// What NVML says this process holds on `device`; false when it does not
// list this process (or cannot list processes).
bool own_memory(nvmlDevice_t device, uint64_t* bytes) noexcept try {
  if (!device) return false;  // else NVML is ready, as for device_memory
  const auto list = nvml()->nvmlDeviceGetComputeRunningProcesses_v3;  // may be absent
  if (!list) return false;
  // Room for the processes there are now, and some that may start meanwhile;
  // NVML says how many it needs when that was not enough.
  std::vector<nvmlProcessInfo_t> infos(64);
  unsigned int count = 0;
  nvmlReturn_t listed = NVML_ERROR_INSUFFICIENT_SIZE;
  for (int attempt = 0; attempt < 3 && listed == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    count = static_cast<unsigned int>(infos.size());
    listed = list(device, &count, infos.data());
    if (listed == NVML_ERROR_INSUFFICIENT_SIZE) infos.resize(count + 16);
  }
  if (listed != NVML_SUCCESS) return false;
  const auto self = static_cast<unsigned int>(getpid());
  for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
    if (infos[i].pid != self) continue;
    *bytes = infos[i].usedGpuMemory;
    return true;
  }
  return false;
} catch (...) {
  return false;  // no host memory for the list: measured another way
}

// Context creation and primary-context state changes, one at a time: the
// measurement must see one creation alone, and the primary context's state
// before a retain must still hold when the retain runs.
std::mutex lifecycle_mu;

// What one context of this process takes on each device, once measured.
struct Footprint {
  bool measured = false;
  uint64_t bytes = 0;
};
Footprint footprints[options::kDeviceOrdinalCount];  // under lifecycle_mu

// What a context was charged: each cuCtxCreate context, and each device's
// primary context.
struct Charge {
  int device = -1;  // the ledger's
  uint64_t bytes = 0;
};
Charge primary_charges[options::kDeviceOrdinalCount];  // under lifecycle_mu

std::mutex contexts_mu;  // after lifecycle_mu when both are taken
std::unordered_map<CUcontext, Charge>& contexts() {
  static auto* map = new std::unordered_map<CUcontext, Charge>();  // never destroyed
  return *map;
}

bool remember(CUcontext ctx, Charge charge) {
  std::lock_guard<std::mutex> guard(contexts_mu);
  try {
    contexts()[ctx] = charge;
  } catch (...) {
    return false;
  }
  return true;
}

bool forget(CUcontext ctx, Charge* charge) {
  std::lock_guard<std::mutex> guard(contexts_mu);
  auto it = contexts().find(ctx);
  if (it == contexts().end()) return false;
  *charge = it->second;
  contexts().erase(it);
  return true;
}

// Without NVML: what one more context takes, measured by the driver itself.
// `ctx` is a context on `dev` (the one just created); the drop in its free
// memory across the creation of a second one, destroyed at once, is the
// figure. Less than the first context took (that one also holds what the
// driver sets up once per process and device), and no more than the device.
uint64_t footprint_by_free_drop(CUdevice dev, CUcontext ctx) {
  auto push = real_function(real::cuCtxPushCurrent_v2);
  auto pop = real_function(real::cuCtxPopCurrent_v2);
  auto get_info = real_function(real::cuMemGetInfo_v2);
  auto create = real_function(real::cuCtxCreate_v2);
  auto destroy = real_function(real::cuCtxDestroy_v2);
  if (!push || !pop || !get_info || !create || !destroy || push(ctx) != CUDA_SUCCESS) return 0;
  uint64_t bytes = 0;
  size_t before = 0, after = 0, total = 0;
  CUcontext probe = nullptr;
  if (get_info(&before, &total) == CUDA_SUCCESS && create(&probe, 0, dev) == CUDA_SUCCESS) {
    if (get_info(&after, &total) == CUDA_SUCCESS && before > after)
      bytes = std::min<uint64_t>(before - after, total);
    destroy(probe);  // and with it, off the stack
  }
  CUcontext popped = nullptr;
  pop(&popped);
  return bytes;
}

void say_measured_without_nvml() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(stderr,
                 "gpulimit: NVML (%s) cannot be loaded or does not know the device: a context is "
                 "charged what the driver's free memory drops by when one more is created\n",
                 nvidia::kNvmlLibraryName);
  });
}

// Creates a context on CUDA device `dev` (ledger device `device`) with
// `create()` and charges its footprint: reserved before `create()` once
// measured, else measured around this creation and then reserved. Over the
// cap, `undo()` takes the new context away again and *pctx is as it was.
// The caller holds lifecycle_mu.
template <typename Create, typename Undo>
CUresult create_charged(Tenant* tenant, CUcontext* pctx, CUdevice dev, int device, Create&& create,
                        Undo&& undo, Charge* charge) {
  Footprint& footprint = footprints[dev];
  *charge = Charge{device, footprint.bytes};
  if (footprint.measured) {
    if (footprint.bytes && !tenant->reserve(device, footprint.bytes))
      return CUDA_ERROR_OUT_OF_MEMORY;
    const CUresult result = create();
    if (result != CUDA_SUCCESS && footprint.bytes) tenant->release(device, footprint.bytes);
    return result;
  }
  const nvmlDevice_t handle = nvml_device(dev);
  nvmlMemory_t before{}, after{};
  const bool known = device_memory(handle, &before);
  const CUcontext previous = *pctx;
  const CUresult result = create();
  if (result != CUDA_SUCCESS) return result;
  footprint.measured = true;
  uint64_t own = 0;
  const bool listed = own_memory(handle, &own);
  if (known && device_memory(handle, &after)) {
    if (listed)
      footprint.bytes = std::min<uint64_t>(own, after.total);
    else if (before.free > after.free)
      footprint.bytes = std::min(before.free - after.free, after.total);
  } else if (!known) {
    say_measured_without_nvml();
    footprint.bytes = footprint_by_free_drop(dev, *pctx);
  }
  *charge = Charge{device, footprint.bytes};
  if (footprint.bytes && !tenant->reserve(device, footprint.bytes)) {
    undo();
    *pctx = previous;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

// The ledger device of CUDA device `dev` under a cap, or -1.
int capped_device(Tenant* tenant, CUdevice dev) {
  return tenant && dev >= 0 && dev < options::kDeviceOrdinalCount ? tenant->ledger_device(dev) : -1;
}

template <typename Create>
CUresult create_charged_context(CUcontext* pctx, CUdevice dev, Create&& create) {
  Tenant* tenant = Tenant::limited();
  if (!tenant && Tenant::refused()) return CUDA_ERROR_NOT_INITIALIZED;
  const int device = pctx ? capped_device(tenant, dev) : -1;
  if (device < 0) return create();
  nvml();  // loaded before the lock: dlopen takes the loader's own
  std::lock_guard<std::mutex> guard(lifecycle_mu);
  auto destroy_real = real_function(real::cuCtxDestroy_v2);
  auto destroy = [&](CUcontext ctx) {
    if (destroy_real) destroy_real(ctx);
  };
  const CUcontext previous = *pctx;
  Charge charge;
  const CUresult result = create_charged(
      tenant, pctx, dev, device, create, [&] { destroy(*pctx); }, &charge);
  if (result != CUDA_SUCCESS || !charge.bytes) return result;
  if (!remember(*pctx, charge)) {
    // Out of host memory for the books: undo rather than let it escape the cap.
    destroy(*pctx);
    *pctx = previous;
    tenant->release(device, charge.bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

// Creates a context, charged under a cap, and tells the launch gate of it.
template <typename Create>
CUresult create_context(CUcontext* pctx, CUdevice dev, Create&& create) {
  const CUresult result = create_charged_context(pctx, dev, create);
  if (result == CUDA_SUCCESS && pctx) gate::note_context(dev, *pctx);
  return result;
}

template <typename Destroy>
CUresult destroy_context(CUcontext ctx, Destroy&& destroy) {
  Tenant* tenant = Tenant::limited();
  Charge charge;
  if (!tenant || !forget(ctx, &charge)) return destroy();
  const CUresult result = destroy();
  if (result == CUDA_SUCCESS)
    tenant->release(charge.device, charge.bytes);
  else
    remember(ctx, charge);  // still alive
  return result;
}

// Whether the primary context of `dev` exists; false when the driver cannot say.
bool primary_active(CUdevice dev, bool* active) {
  auto get_state = real_function(real::cuDevicePrimaryCtxGetState);
  unsigned int flags = 0;
  int state = 0;
  if (!get_state || get_state(dev, &flags, &state) != CUDA_SUCCESS) return false;
  *active = state != 0;
  return true;
}

// After a release or reset of `dev`'s primary context: once it is gone, what
// it was charged goes back. The caller holds lifecycle_mu.
void settle_primary(Tenant* tenant, CUdevice dev) {
  Charge& charge = primary_charges[dev];
  bool active = true;
  if (!charge.bytes || !primary_active(dev, &active) || active) return;
  tenant->release(charge.device, charge.bytes);
  charge = Charge{};
}

template <typename Release>
CUresult release_primary(CUdevice dev, Release&& release) {
  Tenant* tenant = Tenant::limited();
  if (capped_device(tenant, dev) < 0) return release();
  std::lock_guard<std::mutex> guard(lifecycle_mu);
  const CUresult result = release();
  if (result == CUDA_SUCCESS) settle_primary(tenant, dev);
  return result;
}

}  // namespace

GPULIMIT_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params,
                                        unsigned int flags, CUdevice dev) {
  auto real = real_function(real::cuCtxCreate_v4);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return create_context(pctx, dev, [&] { return real(pctx, params, flags, dev); });
}

GPULIMIT_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params,
                                        int num_params, unsigned int flags, CUdevice dev) {
  auto real = real_function(real::cuCtxCreate_v3);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return create_context(pctx, dev, [&] { return real(pctx, params, num_params, flags, dev); });
}

GPULIMIT_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  auto real = real_function(real::cuCtxCreate_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return create_context(pctx, dev, [&] { return real(pctx, flags, dev); });
}

GPULIMIT_EXPORT CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  auto real = real_function(real::cuCtxCreate);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return create_context(pctx, dev, [&] { return real(pctx, flags, dev); });
}

GPULIMIT_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  auto real = real_function(real::cuCtxDestroy_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return destroy_context(ctx, [&] { return real(ctx); });
}

GPULIMIT_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  auto real = real_function(real::cuCtxDestroy);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return destroy_context(ctx, [&] { return real(ctx); });
}

namespace {

// Retains `dev`'s primary context, charging it under a cap when this retain
// creates it.
CUresult retain_primary(CUcontext* pctx, CUdevice dev) {
  auto real = real_function(real::cuDevicePrimaryCtxRetain);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  Tenant* tenant = Tenant::limited();
  if (!tenant && Tenant::refused()) return CUDA_ERROR_NOT_INITIALIZED;
  const int device = pctx ? capped_device(tenant, dev) : -1;
  if (device < 0) return real(pctx, dev);
  nvml();  // loaded before the lock: dlopen takes the loader's own
  std::lock_guard<std::mutex> guard(lifecycle_mu);
  bool active = false;
  // Only the retain that creates the primary context is charged.
  if (!primary_active(dev, &active) || active) return real(pctx, dev);
  auto release = real_function(real::cuDevicePrimaryCtxRelease_v2);
  Charge charge;
  const CUresult result = create_charged(
      tenant, pctx, dev, device, [&] { return real(pctx, dev); },
      [&] {
        if (release) release(dev);
      },
      &charge);
  if (result == CUDA_SUCCESS) primary_charges[dev] = charge;
  return result;
}

}  // namespace

GPULIMIT_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  const CUresult result = retain_primary(pctx, dev);
  if (result == CUDA_SUCCESS && pctx) gate::note_context(dev, *pctx);
  return result;
}

GPULIMIT_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  auto real = real_function(real::cuDevicePrimaryCtxRelease_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return release_primary(dev, [&] { return real(dev); });
}

GPULIMIT_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  auto real = real_function(real::cuDevicePrimaryCtxRelease);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return release_primary(dev, [&] { return real(dev); });
}

GPULIMIT_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  auto real = real_function(real::cuDevicePrimaryCtxReset_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return release_primary(dev, [&] { return real(dev); });
}

GPULIMIT_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  auto real = real_function(real::cuDevicePrimaryCtxReset);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return release_primary(dev, [&] { return real(dev); });
}
