// Every driver function the workloads call, declared once. The DriverApi
// struct, the cuGetProcAddress requests, the dlsym names and the link-time
// addresses are all generated from this list, so none of them can drift.
//
// A row names one variant in the terms of cudaTypedefs.h, the authoritative
// version-to-variant table: the base name that cuGetProcAddress takes, the
// version that selects the variant (PFN_<name>_v<version> is its type), and
// the symbol libcuda exports for it.
//
//   ENTRY(name, version, symbol)
//       A function without a per-thread default stream variant.
//   ENTRY_PT(name, version, symbol, pt_version, pt_suffix)
//       A function that also has a per-thread default stream variant,
//       introduced at pt_version, typed PFN_<name>_v<pt_version>_<pt_suffix>
//       and exported as <symbol>_<pt_suffix> (ptsz, or ptds for synchronous
//       copies). --stream-mode per-thread selects it.
//   OLDER(name, version, symbol)
//       An older variant of an ENTRY with the same signature, used when the
//       driver lacks the newer one.
//
// Use `name` only pasted (##) or stringised (#), and never pass it on to
// another macro, which would expand it first: cuda.h defines many base names
// as macros (cuMemAlloc -> cuMemAlloc_v2).
#pragma once

// clang-format off
#define WORKLOAD_DRIVER_ENTRY_POINTS(ENTRY, ENTRY_PT, OLDER)                                     \
  /* The driver itself. */                                                                      \
  ENTRY(cuGetErrorName, 6000, cuGetErrorName)                                                   \
  ENTRY(cuInit, 2000, cuInit)                                                                   \
  ENTRY(cuDriverGetVersion, 2020, cuDriverGetVersion)                                           \
  /* Unused, but requested like the rest, so that every access path also makes the */           \
  /* driver (or an interposer) answer a request for cuGetProcAddress itself. */                 \
  ENTRY(cuGetProcAddress, 12000, cuGetProcAddress_v2)                                           \
                                                                                                \
  /* Devices and contexts. */                                                                   \
  ENTRY(cuDeviceGetCount, 2000, cuDeviceGetCount)                                               \
  ENTRY(cuDeviceGet, 2000, cuDeviceGet)                                                         \
  ENTRY(cuDeviceGetName, 2000, cuDeviceGetName)                                                 \
  ENTRY(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2)                                            \
  ENTRY(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute)                                       \
  ENTRY(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain)                               \
  ENTRY(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2)                         \
  ENTRY(cuCtxSetCurrent, 4000, cuCtxSetCurrent)                                                 \
  /* 2000, not 13000: cuCtxSynchronize_v2 (13.0) takes a context argument. */                   \
  ENTRY(cuCtxSynchronize, 2000, cuCtxSynchronize)                                               \
                                                                                                \
  /* Modules. */                                                                                \
  ENTRY(cuModuleLoadData, 2000, cuModuleLoadData)                                               \
  ENTRY(cuModuleGetFunction, 2000, cuModuleGetFunction)                                         \
  ENTRY(cuModuleUnload, 2000, cuModuleUnload)                                                   \
                                                                                                \
  /* Linear memory. */                                                                          \
  ENTRY(cuMemGetInfo, 3020, cuMemGetInfo_v2)                                                    \
  ENTRY(cuMemAlloc, 3020, cuMemAlloc_v2)                                                        \
  ENTRY(cuMemAllocPitch, 3020, cuMemAllocPitch_v2)                                              \
  ENTRY(cuMemAllocManaged, 6000, cuMemAllocManaged)                                             \
  ENTRY(cuMemFree, 3020, cuMemFree_v2)                                                          \
  ENTRY_PT(cuMemsetD32, 3020, cuMemsetD32_v2, 7000, ptds)                                       \
  ENTRY_PT(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2, 7000, ptds)                                     \
                                                                                                \
  /* Stream-ordered memory and pools. */                                                        \
  ENTRY_PT(cuMemAllocAsync, 11020, cuMemAllocAsync, 11020, ptsz)                                \
  ENTRY_PT(cuMemFreeAsync, 11020, cuMemFreeAsync, 11020, ptsz)                                  \
  ENTRY_PT(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync, 11020, ptsz)                \
  ENTRY(cuMemPoolCreate, 11020, cuMemPoolCreate)                                                \
  ENTRY(cuMemPoolDestroy, 11020, cuMemPoolDestroy)                                              \
  ENTRY(cuMemPoolTrimTo, 11020, cuMemPoolTrimTo)                                                \
  ENTRY(cuMemPoolGetAttribute, 11020, cuMemPoolGetAttribute)                                    \
                                                                                                \
  /* Virtual memory management. */                                                              \
  ENTRY(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity)                    \
  ENTRY(cuMemCreate, 10020, cuMemCreate)                                                        \
  ENTRY(cuMemRelease, 10020, cuMemRelease)                                                      \
  ENTRY(cuMemAddressReserve, 10020, cuMemAddressReserve)                                        \
  ENTRY(cuMemAddressFree, 10020, cuMemAddressFree)                                              \
  ENTRY(cuMemMap, 10020, cuMemMap)                                                              \
  ENTRY(cuMemUnmap, 10020, cuMemUnmap)                                                          \
  ENTRY(cuMemSetAccess, 10020, cuMemSetAccess)                                                  \
                                                                                                \
  /* Arrays. */                                                                                 \
  ENTRY(cuArrayCreate, 3020, cuArrayCreate_v2)                                                  \
  ENTRY(cuArray3DCreate, 3020, cuArray3DCreate_v2)                                              \
  ENTRY(cuArrayDestroy, 2000, cuArrayDestroy)                                                   \
  ENTRY(cuMipmappedArrayCreate, 5000, cuMipmappedArrayCreate)                                   \
  ENTRY(cuMipmappedArrayDestroy, 5000, cuMipmappedArrayDestroy)                                 \
                                                                                                \
  /* Streams and events. */                                                                     \
  ENTRY(cuStreamCreate, 2000, cuStreamCreate)                                                   \
  ENTRY(cuStreamDestroy, 4000, cuStreamDestroy_v2)                                              \
  ENTRY_PT(cuStreamSynchronize, 2000, cuStreamSynchronize, 7000, ptsz)                          \
  ENTRY(cuEventCreate, 2000, cuEventCreate)                                                     \
  ENTRY_PT(cuEventRecord, 2000, cuEventRecord, 7000, ptsz)                                      \
  ENTRY(cuEventSynchronize, 2000, cuEventSynchronize)                                           \
  ENTRY(cuEventElapsedTime, 12080, cuEventElapsedTime_v2)                                       \
  /* Drivers before 12.8 have only the first cuEventElapsedTime. */                             \
  OLDER(cuEventElapsedTime, 2000, cuEventElapsedTime)                                           \
  ENTRY(cuEventDestroy, 4000, cuEventDestroy_v2)                                                \
                                                                                                \
  /* Launches. */                                                                               \
  ENTRY_PT(cuLaunchKernel, 4000, cuLaunchKernel, 7000, ptsz)                                    \
  ENTRY_PT(cuLaunchKernelEx, 11060, cuLaunchKernelEx, 11060, ptsz)                              \
  ENTRY_PT(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel, 9000, ptsz)              \
                                                                                                \
  /* Graphs. */                                                                                 \
  ENTRY_PT(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2, 10010, ptsz)                   \
  ENTRY_PT(cuStreamEndCapture, 10000, cuStreamEndCapture, 10000, ptsz)                          \
  ENTRY(cuGraphCreate, 10000, cuGraphCreate)                                                    \
  ENTRY(cuGraphAddKernelNode, 12000, cuGraphAddKernelNode_v2)                                   \
  ENTRY(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags)                        \
  ENTRY_PT(cuGraphLaunch, 10000, cuGraphLaunch, 10000, ptsz)                                    \
  ENTRY(cuGraphExecDestroy, 10000, cuGraphExecDestroy)                                          \
  ENTRY(cuGraphDestroy, 10000, cuGraphDestroy)
// clang-format on

// The symbol a per-thread variant is exported as, as an identifier and as a
// string: (cuLaunchKernel, ptsz) -> cuLaunchKernel_ptsz, "cuLaunchKernel_ptsz".
#define WORKLOAD_PT_SYMBOL(symbol, pt_suffix) symbol##_##pt_suffix
#define WORKLOAD_PT_SYMBOL_NAME(symbol, pt_suffix) WORKLOAD_STRINGIZE_TOKEN(symbol##_##pt_suffix)
#define WORKLOAD_STRINGIZE_TOKEN(token) #token
