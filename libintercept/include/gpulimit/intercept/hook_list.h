// Every driver function gpulimit hooks, declared once. From this list come
// the exported symbols' checked types, the real-function slots, the answers
// to dlsym and the answers to cuGetProcAddress, so no list can drift from
// another.
//
//   GPULIMIT_DRIVER_HOOK(base, version, symbol, suffix)
//
// One row per variant, in the terms of cudaTypedefs.h (the toolkit's own
// version-to-variant table): `base` is the name cuGetProcAddress takes,
// `version` the CUDA version that introduced the variant, `symbol` the name
// libcuda exports for it, `suffix` empty or _ptsz/_ptds for the per-thread
// default-stream variants. Its type is PFN_<base>_v<version><suffix>. Every
// variant of a hooked function is listed, old ones included: a caller that
// asks for an old ABI gets a hook of that ABI, never another.
//
// The hook for a row is the function `symbol` itself, defined in the file of
// its concern (hooks_*.cpp) with GPULIMIT_EXPORT; it calls the real variant
// through gpulimit::real::symbol. A row without its hook does not link; a
// hook without its row fails the export test.
#pragma once

// clang-format off
#define GPULIMIT_DRIVER_HOOKS(X)                                                       \
  /* Initialisation and lookup */                                                      \
  X(cuInit, 2000, cuInit, )                                                            \
  X(cuGetProcAddress, 11030, cuGetProcAddress, )                                       \
  X(cuGetProcAddress, 12000, cuGetProcAddress_v2, )                                    \
  /* Linear memory */                                                                  \
  X(cuMemAlloc, 2000, cuMemAlloc, )                                                    \
  X(cuMemAlloc, 3020, cuMemAlloc_v2, )                                                 \
  X(cuMemAllocPitch, 2000, cuMemAllocPitch, )                                          \
  X(cuMemAllocPitch, 3020, cuMemAllocPitch_v2, )                                       \
  X(cuMemAllocManaged, 6000, cuMemAllocManaged, )                                      \
  X(cuMemFree, 2000, cuMemFree, )                                                      \
  X(cuMemFree, 3020, cuMemFree_v2, )                                                   \
  /* Stream-ordered memory */                                                          \
  X(cuMemAllocAsync, 11020, cuMemAllocAsync, )                                         \
  X(cuMemAllocAsync, 11020, cuMemAllocAsync_ptsz, _ptsz)                               \
  X(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync, )                         \
  X(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync_ptsz, _ptsz)               \
  X(cuMemFreeAsync, 11020, cuMemFreeAsync, )                                           \
  X(cuMemFreeAsync, 11020, cuMemFreeAsync_ptsz, _ptsz)                                 \
  X(cuMemPoolCreate, 11020, cuMemPoolCreate, )                                         \
  X(cuMemPoolDestroy, 11020, cuMemPoolDestroy, )                                       \
  X(cuMemPoolTrimTo, 11020, cuMemPoolTrimTo, )                                         \
  /* Virtual memory: physical allocations */                                          \
  X(cuMemCreate, 10020, cuMemCreate, )                                                 \
  X(cuMemRelease, 10020, cuMemRelease, )                                               \
  X(cuMemRetainAllocationHandle, 11000, cuMemRetainAllocationHandle, )                 \
  /* Virtual memory: mappings, which keep physical memory alive */                     \
  X(cuMemMap, 10020, cuMemMap, )                                                       \
  X(cuMemUnmap, 10020, cuMemUnmap, )                                                   \
  /* Arrays */                                                                         \
  X(cuArrayCreate, 2000, cuArrayCreate, )                                              \
  X(cuArrayCreate, 3020, cuArrayCreate_v2, )                                           \
  X(cuArray3DCreate, 2000, cuArray3DCreate, )                                          \
  X(cuArray3DCreate, 3020, cuArray3DCreate_v2, )                                       \
  X(cuArrayDestroy, 2000, cuArrayDestroy, )                                            \
  X(cuMipmappedArrayCreate, 5000, cuMipmappedArrayCreate, )                            \
  X(cuMipmappedArrayDestroy, 5000, cuMipmappedArrayDestroy, )                          \
  /* Graph memory: charged from instantiation until freed and trimmed */              \
  X(cuGraphInstantiate, 10000, cuGraphInstantiate, )                                   \
  X(cuGraphInstantiate, 11000, cuGraphInstantiate_v2, )                                \
  X(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags, )                 \
  X(cuGraphInstantiateWithParams, 12000, cuGraphInstantiateWithParams, )               \
  X(cuGraphInstantiateWithParams, 12000, cuGraphInstantiateWithParams_ptsz, _ptsz)     \
  X(cuGraphExecDestroy, 10000, cuGraphExecDestroy, )                                   \
  X(cuDeviceGraphMemTrim, 11040, cuDeviceGraphMemTrim, )                               \
  /* Contexts: what creating one takes from the device */                              \
  X(cuCtxCreate, 2000, cuCtxCreate, )                                                  \
  X(cuCtxCreate, 3020, cuCtxCreate_v2, )                                               \
  X(cuCtxCreate, 11040, cuCtxCreate_v3, )                                              \
  X(cuCtxCreate, 12050, cuCtxCreate_v4, )                                              \
  X(cuCtxDestroy, 2000, cuCtxDestroy, )                                                \
  X(cuCtxDestroy, 4000, cuCtxDestroy_v2, )                                             \
  X(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain, )                        \
  X(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease, )                      \
  X(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2, )                  \
  X(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset, )                          \
  X(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2, )                      \
  /* What the device looks like from inside the tenant */                              \
  X(cuMemGetInfo, 2000, cuMemGetInfo, )                                                \
  X(cuMemGetInfo, 3020, cuMemGetInfo_v2, )                                             \
  X(cuDeviceTotalMem, 2000, cuDeviceTotalMem, )                                        \
  X(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2, )                                     \
  /* Launches, through the time-slicing gate (launch_gate.h) */                      \
  X(cuLaunchKernel, 4000, cuLaunchKernel, )                                            \
  X(cuLaunchKernel, 7000, cuLaunchKernel_ptsz, _ptsz)                                  \
  X(cuLaunchKernelEx, 11060, cuLaunchKernelEx, )                                       \
  X(cuLaunchKernelEx, 11060, cuLaunchKernelEx_ptsz, _ptsz)                             \
  X(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel, )                      \
  X(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel_ptsz, _ptsz)            \
  X(cuGraphLaunch, 10000, cuGraphLaunch, )                                             \
  X(cuGraphLaunch, 10000, cuGraphLaunch_ptsz, _ptsz)
// clang-format on

// Driver functions gpulimit calls but does not hook: real slots only, never
// exported, never answered to dlsym or cuGetProcAddress.
// clang-format off
#define GPULIMIT_DRIVER_CALLS(X)                                                       \
  X(cuCtxGetCurrent, 4000, cuCtxGetCurrent, )                                          \
  X(cuCtxGetDevice, 2000, cuCtxGetDevice, )                                            \
  X(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2, )                                       \
  X(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2, )                                     \
  X(cuCtxSynchronize, 2000, cuCtxSynchronize, )                                        \
  X(cuDeviceGetCount, 2000, cuDeviceGetCount, )                                        \
  X(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState, )                    \
  X(cuGraphGetNodes, 10000, cuGraphGetNodes, )                                         \
  X(cuGraphNodeGetType, 10000, cuGraphNodeGetType, )                                   \
  X(cuGraphMemAllocNodeGetParams, 11040, cuGraphMemAllocNodeGetParams, )               \
  X(cuGraphMemFreeNodeGetParams, 11040, cuGraphMemFreeNodeGetParams, )                 \
  X(cuDeviceGetGraphMemAttribute, 11040, cuDeviceGetGraphMemAttribute, )               \
  X(cuGraphChildGraphNodeGetGraph, 10000, cuGraphChildGraphNodeGetGraph, )             \
  X(cuDeviceGetUuid, 11040, cuDeviceGetUuid_v2, )                                     \
  X(cuStreamIsCapturing, 10000, cuStreamIsCapturing, )                                 \
  X(cuStreamIsCapturing, 10000, cuStreamIsCapturing_ptsz, _ptsz)                       \
  X(cuThreadExchangeStreamCaptureMode, 10010, cuThreadExchangeStreamCaptureMode, )     \
  X(cuStreamGetCtx, 9020, cuStreamGetCtx, )                                            \
  X(cuStreamGetCtx, 9020, cuStreamGetCtx_ptsz, _ptsz)                                  \
  X(cuStreamGetDevice, 12080, cuStreamGetDevice, )                                     \
  X(cuStreamGetDevice, 12080, cuStreamGetDevice_ptsz, _ptsz)                           \
  X(cuDeviceGetMemPool, 11020, cuDeviceGetMemPool, )                                   \
  X(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool, )                     \
  X(cuMemPoolGetAttribute, 11020, cuMemPoolGetAttribute, )
// clang-format on

// NVML functions gpulimit hooks (exported, answered to dlsym): what the job
// sees of a device's memory through NVML (nvidia-smi, pynvml, PyTorch's
// out-of-memory report). gpulimit/nvidia/nvml_subset.h gives their types.
// clang-format off
#define GPULIMIT_NVML_HOOKS(X)                                                         \
  X(nvmlDeviceGetMemoryInfo)                                                           \
  X(nvmlDeviceGetMemoryInfo_v2)
// clang-format on
