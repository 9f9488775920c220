// Kernel and host-function launches. A kernel is an op that occupies the
// device for its duration:
//   - a kernel whose name starts with "spin" and whose first parameter is 8
//     bytes takes that many nanoseconds (the workloads' kernel spins on
//     %globaltimer for as long on a real GPU);
//   - every other kernel takes FAKECUDA_KERNEL_NS plus
//     FAKECUDA_KERNEL_NS_PER_WAVE for each wave of its grid, a wave being one
//     block on every SM of the device: a large grid holds the device longer.
// Kernels do not compute: the memory they would write keeps what it held.
#include "launch.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "functions.h"
#include "stream.h"

using namespace fakecuda;

namespace {

// The launch's arguments copied into one buffer at the function's parameter
// offsets, from kernelParams or from the packed `extra` buffer.
std::shared_ptr<const KernelLaunch> copy_launch(const CUfunc_st& f, CUfunction handle,
                                                CUctx_st* ctx, const LaunchShape& shape,
                                                void** params, void** extra) {
  auto launch = std::make_shared<KernelLaunch>();
  launch->func = handle;
  launch->ctx = ctx;
  launch->shape = shape;
  const size_t count = f.param_sizes.size();
  size_t bytes = 0;
  for (size_t i = 0; i < count; ++i)
    bytes = std::max<size_t>(bytes, f.param_offsets[i] + f.param_sizes[i]);
  launch->args.assign(bytes, 0);
  if (params) {
    for (size_t i = 0; i < count; ++i)
      if (params[i]) std::memcpy(&launch->args[f.param_offsets[i]], params[i], f.param_sizes[i]);
  } else if (extra) {
    const void* buffer = nullptr;
    size_t size = bytes;
    for (void** e = extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
      if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = e[1];
      if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE && e[1]) size = *static_cast<const size_t*>(e[1]);
    }
    if (buffer) std::memcpy(launch->args.data(), buffer, std::min(size, bytes));
  }
  launch->arg_pointers.resize(count);
  for (size_t i = 0; i < count; ++i)
    launch->arg_pointers[i] = launch->args.data() + f.param_offsets[i];
  return launch;
}

}  // namespace

namespace fakecuda {

CUresult kernel_op_locked(CUfunction handle, const LaunchShape& shape, void** params, void** extra,
                          Op* out, CUctx_st* ctx, bool keep_launch) {
  Driver& d = Driver::get();
  for (int i = 0; i < 3; ++i)
    FAKECUDA_REQUIRE(shape.grid[i] > 0 && shape.block[i] > 0, CUDA_ERROR_INVALID_VALUE);
  const uint64_t threads = uint64_t{shape.block[0]} * shape.block[1] * shape.block[2];
  FAKECUDA_REQUIRE(threads <= 1024 && shape.block[2] <= 64, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(shape.grid[1] <= 65535 && shape.grid[2] <= 65535, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(shape.shared_mem <= (227u << 10), CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(!(params && extra), CUDA_ERROR_INVALID_VALUE);
  // A CUkernel's library is loaded into the context here at the latest.
  CUfunc_st* f = nullptr;
  if (CUresult r = resolve_function_locked(handle, ctx, &f); r != CUDA_SUCCESS) return r;
  const uint64_t blocks = uint64_t{shape.grid[0]} * shape.grid[1] * shape.grid[2];
  const uint64_t sms = d.device(f->module->ctx->ordinal).config->sm_count;
  if (shape.cooperative) {
    const uint64_t resident = sms * std::min<uint64_t>(32, 2048 / threads);
    FAKECUDA_REQUIRE(blocks <= resident, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  }
  Op op;
  op.kind = Op::Kind::kKernel;
  op.name = f->name;
  op.duration_ns = d.config().process.default_kernel_ns +
                   d.config().process.kernel_ns_per_wave * ((blocks + sms - 1) / sms);
  if (f->timed) {
    // The first parameter, from kernelParams or from the packed `extra` buffer.
    uint64_t ns = 0;
    if (params && params[0]) {
      std::memcpy(&ns, params[0], sizeof(ns));
    } else if (extra) {
      for (void** e = extra; *e != CU_LAUNCH_PARAM_END; e += 2)
        if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER && e[1]) std::memcpy(&ns, e[1], sizeof(ns));
    } else {
      return CUDA_ERROR_INVALID_VALUE;
    }
    op.duration_ns = ns;
  } else if (!f->param_sizes.empty() && !params && !extra) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (keep_launch) op.launch = copy_launch(*f, handle, ctx, shape, params, extra);
  f->loaded = true;  // lazy loading finishes at the first launch
  *out = std::move(op);
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

namespace {

CUresult launch(CUfunction f, const LaunchShape& shape, CUstream stream, void** params,
                void** extra, DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  // FAKECUDA_LAUNCH_DELAY_NS: the call is inside the driver, its work not yet queued.
  if (const uint64_t delay = d.config().process.launch_delay_ns; delay > 0)
    std::this_thread::sleep_for(std::chrono::nanoseconds(delay));
  std::lock_guard<std::mutex> guard(d.mu);
  // Only a captured launch becomes a graph node that needs its launch kept;
  // a stream that cannot be resolved is submit_locked's error to report.
  CUstream_st* s = nullptr;
  const bool captured = resolve_stream(stream, mode, &s) == CUDA_SUCCESS && s->capture;
  Op op;
  if (CUresult r = kernel_op_locked(f, shape, params, extra, &op, nullptr, captured);
      r != CUDA_SUCCESS)
    return r;
  return submit_locked(stream, mode, std::move(op));
}

CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned smem, CUstream stream, void** params,
                       void** extra, bool cooperative, DefaultStream mode) {
  return launch(f, LaunchShape{{gx, gy, gz}, {bx, by, bz}, smem, cooperative}, stream, params,
                extra, mode);
}

CUresult launch_ex(const CUlaunchConfig* config, CUfunction f, void** params, void** extra,
                   DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(config, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(config->numAttrs == 0 || config->attrs, CUDA_ERROR_INVALID_VALUE);
  bool cooperative = false;
  for (unsigned i = 0; i < config->numAttrs; ++i)
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE &&
        config->attrs[i].value.cooperative)
      cooperative = true;
  return launch(f,
                LaunchShape{{config->gridDimX, config->gridDimY, config->gridDimZ},
                            {config->blockDimX, config->blockDimY, config->blockDimZ},
                            config->sharedMemBytes,
                            cooperative},
                config->hStream, params, extra, mode);
}

CUresult host_func(CUstream stream, CUhostFn fn, void* data, DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(fn, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  Op op = action_op([fn, data](uint64_t) { fn(data); });
  op.run_unlocked = true;
  return submit_locked(stream, mode, std::move(op));
}

CUresult add_callback(CUstream stream, CUstreamCallback callback, void* data, unsigned flags,
                      DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(callback && flags == 0, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUstream_st* used = nullptr;
  if (CUresult r = resolve_stream(stream, mode, &used); r != CUDA_SUCCESS) return r;
  // Callbacks receive the handle the caller passed.
  Op op = action_op([callback, stream, data](uint64_t) { callback(stream, CUDA_SUCCESS, data); });
  op.run_unlocked = true;
  return submit_locked(used, mode, std::move(op));
}

}  // namespace

FAKECUDA_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int smem, CUstream s,
                                        void** params, void** extra) {
  return launch_kernel(f, gx, gy, gz, bx, by, bz, smem, s, params, extra, false,
                       DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                             unsigned int gz, unsigned int bx, unsigned int by,
                                             unsigned int bz, unsigned int smem, CUstream s,
                                             void** params, void** extra) {
  return launch_kernel(f, gx, gy, gz, bx, by, bz, smem, s, params, extra, false,
                       DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                                   unsigned int gz, unsigned int bx,
                                                   unsigned int by, unsigned int bz,
                                                   unsigned int smem, CUstream s, void** params) {
  return launch_kernel(f, gx, gy, gz, bx, by, bz, smem, s, params, nullptr, true,
                       DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx,
                                                        unsigned int gy, unsigned int gz,
                                                        unsigned int bx, unsigned int by,
                                                        unsigned int bz, unsigned int smem,
                                                        CUstream s, void** params) {
  return launch_kernel(f, gx, gy, gz, bx, by, bz, smem, s, params, nullptr, true,
                       DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                                          void** extra) {
  return launch_ex(config, f, params, extra, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                               void** params, void** extra) {
  return launch_ex(config, f, params, extra, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void* data) {
  return host_func(s, fn, data, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void* data) {
  return host_func(s, fn, data, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuStreamAddCallback(CUstream s, CUstreamCallback cb, void* data,
                                             unsigned int flags) {
  return add_callback(s, cb, data, flags, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void* data,
                                                  unsigned int flags) {
  return add_callback(s, cb, data, flags, DefaultStream::kPerThread);
}
