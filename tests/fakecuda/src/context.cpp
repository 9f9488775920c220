#include "context.h"

#include <algorithm>

#include "executor.h"
#include "functions.h"

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
}

uint64_t next_context_id = 1;

}  // namespace

CUresult create_context_locked(CUdevice ordinal, unsigned flags, bool primary, CUctx_st** out) {
  Driver& d = Driver::get();
  const VisibleDevice& dev = d.device(ordinal);
  if (!d.shared().charge(dev.physical, dev.config->context_mem)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto* ctx = new CUctx_st{};
  ctx->magic = kContextMagic;
  ctx->ordinal = ordinal;
  ctx->physical = dev.physical;
  ctx->primary = primary;
  ctx->flags = flags;
  ctx->id = next_context_id++;
  set_default_limits(ctx);
  d.live.insert(ctx);
  d.contexts.push_back(ctx);
  ctx->legacy_stream = new_stream(ctx, CUstream_st::Kind::kLegacy, 0, 0);
  d.shared().context_created(dev.physical);
  load_libraries_into_locked(ctx);
  *out = ctx;
  return CUDA_SUCCESS;
}

void destroy_context(std::unique_lock<std::mutex>& lock, CUctx_st* ctx) {
  Driver::get().executor().wait_context_idle(lock, ctx);
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
    if (a.charged) d.shared().uncharge(a.physical, a.charged);
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
  auto& stack = context_stack();
  stack.erase(std::remove(stack.begin(), stack.end(), ctx), stack.end());
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
  context_stack().push_back(ctx);
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
  context_stack().push_back(ctx);
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
  stack.pop_back();
  return CUDA_SUCCESS;
}
FAKECUDA_EXPORT CUresult cuCtxPopCurrent(CUcontext* pctx) {
  return cuCtxPopCurrent_v2(pctx);
}

FAKECUDA_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  FAKECUDA_REQUIRE_INIT();
  auto& stack = context_stack();
  if (!ctx) {
    if (!stack.empty()) stack.pop_back();
    return CUDA_SUCCESS;
  }
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(live_context(ctx), CUDA_ERROR_INVALID_CONTEXT);
  if (stack.empty())
    stack.push_back(ctx);
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
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st*& ctx = d.primary[static_cast<size_t>(dev)];
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
  if (--d.primary_refs[i] == 0) {
    // The last release resets the primary context: its memory is freed.
    CUctx_st* ctx = d.primary[i];
    d.primary[i] = nullptr;
    destroy_context(lock, ctx);
  }
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
  if (CUctx_st* ctx = d.primary[i]) {
    d.primary[i] = nullptr;
    d.primary_refs[i] = 0;
    destroy_context(lock, ctx);
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
