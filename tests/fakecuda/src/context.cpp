#include "context.h"

#include <algorithm>

#include "device_limits.h"
#include "executor.h"
#include "functions.h"
#include "memory.h"

using namespace fakecuda;

namespace fakecuda {
namespace {

constexpr size_t kDefaultHeap = 8ull << 20;

void set_default_limits(CUctx_st* ctx) {
  std::fill(std::begin(ctx->limits), std::end(ctx->limits), 0);
  ctx->limits[CU_LIMIT_STACK_SIZE] = 1024;
  ctx->limits[CU_LIMIT_PRINTF_FIFO_SIZE] = 1ull << 20;
  ctx->limits[CU_LIMIT_MALLOC_HEAP_SIZE] = kDefaultHeap;
  ctx->limits[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2;
  ctx->limits[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
  ctx->limits[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 32;
  ctx->limits[CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0;
  // Not a CIG (graphics-interop) context: its kernels get the whole opt-in
  // shared memory (chosen: the header documents the limit for CIG only).
  ctx->limits[CU_LIMIT_SHMEM_SIZE] = kSharedPerBlockOptin;
  ctx->limits[CU_LIMIT_CIG_ENABLED] = 0;
  ctx->limits[CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED] = 1;
}

uint64_t next_context_id = 1;

}  // namespace

CUctx_st* new_primary_handle(CUdevice ordinal) {
  Driver& d = Driver::get();
  auto* ctx = new CUctx_st{};
  ctx->magic = kContextMagic;
  ctx->ordinal = ordinal;
  ctx->physical = d.device(ordinal).physical;
  ctx->primary = true;
  ctx->storage = std::make_unique<ContextStorage>();
  return ctx;
}

bool is_primary_handle(const CUctx_st* ctx) {
  const auto& handles = Driver::get().primary_handle;
  return ctx && std::find(handles.begin(), handles.end(), ctx) != handles.end();
}

CUresult create_context_locked(CUdevice ordinal, unsigned flags, bool primary, CUctx_st** out) {
  Driver& d = Driver::get();
  const VisibleDevice& dev = d.device(ordinal);
  if (!d.shared().charge(dev.physical, dev.config->context_mem)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUctx_st* ctx = primary ? d.primary_handle[static_cast<size_t>(ordinal)] : new CUctx_st{};
  ctx->magic = kContextMagic;
  ctx->ordinal = ordinal;
  ctx->physical = dev.physical;
  ctx->primary = primary;
  ctx->flags = flags;
  ctx->heap_bytes = 0;
  ctx->id = next_context_id++;  // a reset primary context is a new context
  ctx->next_seq = 0;
  ctx->streams.clear();
  if (!ctx->storage) ctx->storage = std::make_unique<ContextStorage>();
  set_default_limits(ctx);
  d.live.insert(ctx);
  d.contexts.push_back(ctx);
  ctx->legacy_stream = new_stream(ctx, CUstream_st::Kind::kLegacy, 0, 0);
  d.shared().context_created(dev.physical);
  load_libraries_into_locked(ctx);
  *out = ctx;
  return CUDA_SUCCESS;
}

void run_storage_destructors(std::unique_lock<std::mutex>& lock, CUctx_st* ctx) {
  std::vector<ContextStorage::Pending> pending = ctx->storage->take_all();
  if (pending.empty()) return;
  lock.unlock();
  for (const ContextStorage::Pending& p : pending)
    p.destructor(ctx, p.key, p.value);
  lock.lock();
}

bool destroy_context(std::unique_lock<std::mutex>& lock, CUctx_st* ctx) {
  run_storage_destructors(lock, ctx);
  if (!live_context(ctx)) return false;
  Driver::get().executor().wait_context_idle(lock, ctx);
  release_context_locked(ctx);
  return true;
}

void deactivate_primary(std::unique_lock<std::mutex>& lock, size_t ordinal, bool force) {
  Driver& d = Driver::get();
  CUctx_st* ctx = d.primary[ordinal];
  run_storage_destructors(lock, ctx);
  if (d.primary[ordinal] != ctx) return;  // another reset finished it meanwhile
  if (!force && d.primary_refs[ordinal] > 0) return;
  d.primary[ordinal] = nullptr;
  d.primary_refs[ordinal] = 0;
  d.executor().wait_context_idle(lock, ctx);
  release_context_locked(ctx);
}

void release_context_locked(CUctx_st* ctx) {
  Driver& d = Driver::get();
  // Memory the context owns goes back to the device, as on the real driver.
  for (auto it = d.allocations.begin(); it != d.allocations.end();) {
    Allocation& a = it->second;
    if (a.ctx != ctx || a.kind == AllocationKind::kHost) {
      ++it;
      continue;
    }
    if (const uint64_t bytes = release_ipc_locked(a)) d.shared().uncharge(a.physical, bytes);
    unmap_device_memory(reinterpret_cast<void*>(a.base), a.mapped);
    it = d.allocations.erase(it);
  }
  for (auto it = d.live.begin(); it != d.live.end();) {
    const uint32_t magic = *static_cast<const uint32_t*>(*it);
    void* object = const_cast<void*>(*it);
    bool owned = false;
    switch (magic) {
      case kEventMagic: {
        auto* e = static_cast<CUevent_st*>(object);
        if ((owned = e->ctx == ctx)) {
          e->destroyed = true;
          if (e->pending == 0) delete e;
        }
        break;
      }
      case kModuleMagic: {
        auto* m = static_cast<CUmod_st*>(object);
        if ((owned = m->ctx == ctx)) destroy_module_locked(m);
        break;
      }
      case kArrayMagic: {
        auto* a = static_cast<CUarray_st*>(object);
        if ((owned = a->ctx == ctx && !a->owner)) {
          d.shared().uncharge(ctx->physical, a->charged);
          delete a;
        }
        break;
      }
      case kMipmapMagic: {
        auto* m = static_cast<CUmipmappedArray_st*>(object);
        if ((owned = m->ctx == ctx)) {
          d.shared().uncharge(ctx->physical, m->charged);
          for (auto& level : m->levels)
            d.live.erase(level.get());
          delete m;
        }
        break;
      }
      default:
        break;
    }
    it = owned ? d.live.erase(it) : std::next(it);
  }
  for (CUstream_st* s : ctx->streams) {
    d.live.erase(s);
    delete s;
  }
  const DeviceConfig& config = *d.device(ctx->ordinal).config;
  d.shared().uncharge(ctx->physical, config.context_mem + ctx->heap_bytes);
  d.shared().context_destroyed(ctx->physical);
  d.contexts.erase(std::remove(d.contexts.begin(), d.contexts.end(), ctx), d.contexts.end());
  d.live.erase(ctx);
  context_stack().remove(ctx);
  if (ctx->primary) {
    // The object stays for the next retain, which waits for this moment.
    ctx->streams.clear();
    ctx->legacy_stream = nullptr;
    d.progress.notify_all();
    return;
  }
  delete ctx;
}

CUresult current_context_checked(CUctx_st** out) {
  CUctx_st* ctx = current_context();
  if (!live_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  *out = ctx;
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

// ---- Initialisation ---------------------------------------------------------

FAKECUDA_EXPORT CUresult cuInit(unsigned int flags) {
  return Driver::get().init(flags);
}

FAKECUDA_EXPORT CUresult cuDriverGetVersion(int* version) {
  FAKECUDA_REQUIRE(version, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  if (d.check() == CUDA_SUCCESS) {
    *version = static_cast<int>(d.config().machine.driver_version);
    return CUDA_SUCCESS;
  }
  // Answers before cuInit, as the real driver does: from the environment,
  // since the configuration is not loaded yet.
  Config config;
  std::string error;
  *version = static_cast<int>(load_config(config, error) ? config.machine.driver_version : 13000);
  return CUDA_SUCCESS;
}

// ---- Contexts ------------------------------------------------------------------

static CUresult ctx_create(CUcontext* pctx, unsigned flags, CUdevice dev) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pctx, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = create_context_locked(dev, flags, false, &ctx); r != CUDA_SUCCESS) return r;
  if (!context_stack().push(ctx)) {
    release_context_locked(ctx);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *pctx = ctx;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return ctx_create(pctx, flags, dev);
}
FAKECUDA_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return ctx_create(pctx, flags, dev);
}
FAKECUDA_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam*, int numParams,
                                        unsigned int flags, CUdevice dev) {
  FAKECUDA_REQUIRE(numParams >= 0, CUDA_ERROR_INVALID_VALUE);
  return ctx_create(pctx, flags, dev);
}
FAKECUDA_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams*, unsigned int flags,
                                        CUdevice dev) {
  return ctx_create(pctx, flags, dev);
}

FAKECUDA_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::unique_lock<std::mutex> lock(d.mu);
  FAKECUDA_REQUIRE(live_context(ctx), CUDA_ERROR_INVALID_CONTEXT);
  if (ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  destroy_context(lock, ctx);
  return CUDA_SUCCESS;
}
FAKECUDA_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  return cuCtxDestroy_v2(ctx);
}

FAKECUDA_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(live_context(ctx), CUDA_ERROR_INVALID_CONTEXT);
  FAKECUDA_REQUIRE(context_stack().push(ctx), CUDA_ERROR_OUT_OF_MEMORY);
  return CUDA_SUCCESS;
}
FAKECUDA_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx) {
  return cuCtxPushCurrent_v2(ctx);
}

FAKECUDA_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  FAKECUDA_REQUIRE_INIT();
  auto& stack = context_stack();
  FAKECUDA_REQUIRE(!stack.empty(), CUDA_ERROR_INVALID_CONTEXT);
  if (pctx) *pctx = stack.back();
  stack.pop();
  return CUDA_SUCCESS;
}
FAKECUDA_EXPORT CUresult cuCtxPopCurrent(CUcontext* pctx) {
  return cuCtxPopCurrent_v2(pctx);
}

FAKECUDA_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  FAKECUDA_REQUIRE_INIT();
  auto& stack = context_stack();
  if (!ctx) {
    if (!stack.empty()) stack.pop();
    return CUDA_SUCCESS;
  }
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  // A primary context may be made current before it is retained (the CUDA
  // runtime does so); calls that need it active fail until then.
  FAKECUDA_REQUIRE(live_context(ctx) || is_primary_handle(ctx), CUDA_ERROR_INVALID_CONTEXT);
  if (stack.empty())
    stack.push(ctx);
  else
    stack.back() = ctx;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pctx, CUDA_ERROR_INVALID_VALUE);
  *pctx = current_context();
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(device, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  *device = ctx->ordinal;
  return CUDA_SUCCESS;
}

// CUDA 13: the context is named; NULL means the current one.
FAKECUDA_EXPORT CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(device, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  if (!ctx)
    if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(live_context(ctx), CUDA_ERROR_INVALID_CONTEXT);
  *device = ctx->ordinal;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuCtxGetFlags(unsigned int* flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(flags, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  *flags = ctx->flags;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuCtxGetId(CUcontext ctx, unsigned long long* id) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(id, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  if (!ctx && current_context_checked(&ctx) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  FAKECUDA_REQUIRE(live_context(ctx), CUDA_ERROR_INVALID_CONTEXT);
  *id = ctx->id;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(version, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  if (!ctx && current_context_checked(&ctx) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  FAKECUDA_REQUIRE(live_context(ctx), CUDA_ERROR_INVALID_CONTEXT);
  *version = 3020;  // every context since CUDA 3.2 reports the v2 ABI
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  FAKECUDA_REQUIRE_INIT();
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(limit >= 0 && limit < CU_LIMIT_MAX, CUDA_ERROR_UNSUPPORTED_LIMIT);
  // Properties of the context, not requests: they can only be queried.
  FAKECUDA_REQUIRE(limit != CU_LIMIT_SHMEM_SIZE && limit != CU_LIMIT_CIG_ENABLED,
                   CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(limit != CU_LIMIT_MAX_L2_FETCH_GRANULARITY || value <= 128,
                   CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  if (limit == CU_LIMIT_MALLOC_HEAP_SIZE) {
    // The device-side malloc heap is device memory; beyond the default (part
    // of the context's own footprint) it is charged like any allocation.
    const uint64_t extra = value > kDefaultHeap ? round_up(value - kDefaultHeap, kPageSize) : 0;
    if (extra > ctx->heap_bytes && !d.shared().charge(ctx->physical, extra - ctx->heap_bytes))
      return CUDA_ERROR_OUT_OF_MEMORY;
    if (extra < ctx->heap_bytes) d.shared().uncharge(ctx->physical, ctx->heap_bytes - extra);
    ctx->heap_bytes = extra;
  }
  // A hint the driver may clamp to what the hardware has, as documented.
  if (limit == CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
    value = std::min<size_t>(value, kMaxPersistingL2Bytes);
  ctx->limits[limit] = value;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuCtxGetLimit(size_t* value, CUlimit limit) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(value, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(limit >= 0 && limit < CU_LIMIT_MAX, CUDA_ERROR_UNSUPPORTED_LIMIT);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  *value = ctx->limits[limit];
  return CUDA_SUCCESS;
}

// ---- Primary contexts -------------------------------------------------------------

FAKECUDA_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pctx, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  std::unique_lock<std::mutex> lock(d.mu);
  CUctx_st*& ctx = d.primary[static_cast<size_t>(dev)];
  // A reset or last release still tearing the object down finishes first.
  CUctx_st* handle = d.primary_handle[static_cast<size_t>(dev)];
  d.progress.wait(lock, [&] { return ctx || !d.live.count(handle); });
  if (!ctx) {
    if (CUresult r =
            create_context_locked(dev, d.primary_flags[static_cast<size_t>(dev)], true, &ctx);
        r != CUDA_SUCCESS)
      return r;
  }
  ++d.primary_refs[static_cast<size_t>(dev)];
  *pctx = ctx;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  std::unique_lock<std::mutex> lock(d.mu);
  const size_t i = static_cast<size_t>(dev);
  FAKECUDA_REQUIRE(d.primary[i] && d.primary_refs[i] > 0, CUDA_ERROR_INVALID_CONTEXT);
  // The last release resets the primary context: its memory is freed.
  if (--d.primary_refs[i] == 0) deactivate_primary(lock, i, false);
  return CUDA_SUCCESS;
}
FAKECUDA_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);
}

FAKECUDA_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  std::unique_lock<std::mutex> lock(d.mu);
  const size_t i = static_cast<size_t>(dev);
  if (d.primary[i]) {
    d.primary_refs[i] = 0;
    deactivate_primary(lock, i, true);
  }
  return CUDA_SUCCESS;
}
FAKECUDA_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return cuDevicePrimaryCtxReset_v2(dev);
}

FAKECUDA_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags,
                                                    int* active) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(flags && active, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  std::lock_guard<std::mutex> guard(d.mu);
  *flags = d.primary_flags[static_cast<size_t>(dev)];
  *active = d.primary[static_cast<size_t>(dev)] != nullptr;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  std::lock_guard<std::mutex> guard(d.mu);
  d.primary_flags[static_cast<size_t>(dev)] = flags;
  if (CUctx_st* ctx = d.primary[static_cast<size_t>(dev)]) ctx->flags = flags;
  return CUDA_SUCCESS;
}
FAKECUDA_EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

// ---- Cache and shared memory preferences ------------------------------------------

FAKECUDA_EXPORT CUresult cuCtxGetCacheConfig(CUfunc_cache* pconfig) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pconfig, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  *pconfig = ctx->cache_config;
  return CUDA_SUCCESS;
}

// A preference only: kept and reported, it changes no limit.
FAKECUDA_EXPORT CUresult cuCtxSetCacheConfig(CUfunc_cache config) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(config >= CU_FUNC_CACHE_PREFER_NONE && config <= CU_FUNC_CACHE_PREFER_EQUAL,
                   CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  ctx->cache_config = config;
  return CUDA_SUCCESS;
}

// Shared memory banks are four bytes wide and fixed since Maxwell: the
// setter is accepted and has no effect, as documented for such devices.
FAKECUDA_EXPORT CUresult cuCtxGetSharedMemConfig(CUsharedconfig* pConfig) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pConfig, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  *pConfig = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuCtxSetSharedMemConfig(CUsharedconfig config) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(config >= CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE &&
                       config <= CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE,
                   CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUctx_st* ctx = nullptr;
  return current_context_checked(&ctx);
}

// Persisting lines hold no data in the simulator: resetting them is a no-op
// on the current context.
FAKECUDA_EXPORT CUresult cuCtxResetPersistingL2Cache(void) {
  FAKECUDA_REQUIRE_INIT();
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUctx_st* ctx = nullptr;
  return current_context_checked(&ctx);
}

// Contexts are not created with an SM limit (that needs MPS): the affinity
// of every context is the whole device.
FAKECUDA_EXPORT CUresult cuCtxGetExecAffinity(CUexecAffinityParam* pExecAffinity,
                                              CUexecAffinityType type) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pExecAffinity, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(type == CU_EXEC_AFFINITY_TYPE_SM_COUNT, CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  pExecAffinity->type = CU_EXEC_AFFINITY_TYPE_SM_COUNT;
  pExecAffinity->param.smCount.val = d.device(ctx->ordinal).config->sm_count;
  return CUDA_SUCCESS;
}

// ---- Deprecated usage counts (CUDA 2.0), still exported -------------------------

// Counts one more user of the current context and returns it.
FAKECUDA_EXPORT CUresult cuCtxAttach(CUcontext* pctx, unsigned int flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pctx && flags == 0, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  ++ctx->attached;
  *pctx = ctx;
  return CUDA_SUCCESS;
}

// Counts one user less; the creator's own count is the last, and dropping
// it destroys the context as cuCtxDestroy does. The context must be current.
FAKECUDA_EXPORT CUresult cuCtxDetach(CUcontext ctx) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::unique_lock<std::mutex> lock(d.mu);
  FAKECUDA_REQUIRE(live_context(ctx) && ctx == current_context(), CUDA_ERROR_INVALID_CONTEXT);
  if (ctx->attached > 0) {
    --ctx->attached;
    return CUDA_SUCCESS;
  }
  FAKECUDA_REQUIRE(!ctx->primary, CUDA_ERROR_INVALID_CONTEXT);
  destroy_context(lock, ctx);
  return CUDA_SUCCESS;
}
