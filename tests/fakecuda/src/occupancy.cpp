// The occupancy calculator: how many blocks (or clusters) of a function fit
// on one SM (or the device) at once, from the function's attributes
// (registers, static shared memory, thread and dynamic shared memory limits,
// as cuFuncGetAttribute reports them) and the device's limits, by the rules
// of NVIDIA's published calculator (cuda_occupancy.h): registers allocated
// per warp in units of 256 across four sub-partitions, shared memory per
// block rounded up to 128 bytes plus the 1 KiB the driver reserves, at most
// 64 warps and 32 blocks per SM. The shared memory carveout preference is
// not modelled: every SM offers its full 228 KiB.
//
// Clusters are placed within one GPC; an H100 has 8, and the simulated
// device's SMs are spread over them as evenly as they divide.
#include <algorithm>
#include <climits>

#include "device_limits.h"
#include "functions.h"

using namespace fakecuda;

namespace {

// What the calculator needs to know of a function.
struct FunctionLimits {
  int max_threads = 0;
  int registers = 0;
  size_t static_shared = 0;
  size_t max_dynamic_shared = 0;
  bool non_portable_cluster = false;
  int required_cluster[3] = {0, 0, 0};  // 0: none required
};

// The one check of a function handle the calculator makes, and the device
// whose limits apply: that of the context the function was loaded in.
CUresult check_function(CUfunction func, const DeviceConfig** device) {
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUfunc_st* resolved = nullptr;  // a CUkernel: its copy in the current context
  if (CUresult r = resolve_function_locked(func, nullptr, &resolved); r != CUDA_SUCCESS) return r;
  *device = d.device(resolved->module->ctx->ordinal).config;
  return CUDA_SUCCESS;
}

// Reads the function's attributes through the public entry point, so that
// the calculator sees what cuFuncSetAttribute changed. Called without
// Driver::mu, which cuFuncGetAttribute takes.
CUresult read_function(CUfunction func, const DeviceConfig** device, FunctionLimits* out) {
  if (CUresult r = check_function(func, device); r != CUDA_SUCCESS) return r;
  int value = 0;
  auto get = [&](CUfunction_attribute attribute) {
    return cuFuncGetAttribute(&value, attribute, func);
  };
  if (CUresult r = get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK); r != CUDA_SUCCESS) return r;
  out->max_threads = value;
  if (CUresult r = get(CU_FUNC_ATTRIBUTE_NUM_REGS); r != CUDA_SUCCESS) return r;
  out->registers = value;
  if (CUresult r = get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES); r != CUDA_SUCCESS) return r;
  out->static_shared = static_cast<size_t>(std::max(value, 0));
  if (CUresult r = get(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); r != CUDA_SUCCESS)
    return r;
  out->max_dynamic_shared = static_cast<size_t>(std::max(value, 0));
  if (CUresult r = get(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED); r != CUDA_SUCCESS)
    return r;
  out->non_portable_cluster = value != 0;
  const CUfunction_attribute required[3] = {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
                                            CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
                                            CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH};
  for (int i = 0; i < 3; ++i) {
    if (CUresult r = get(required[i]); r != CUDA_SUCCESS) return r;
    out->required_cluster[i] = value;
  }
  return CUDA_SUCCESS;
}

int divide_round_up(int value, int by) {
  return (value + by - 1) / by;
}

// Resident blocks of `block_size` threads and `dynamic_shared` bytes on one
// SM: the tightest of the warp, block, register and shared memory limits.
int blocks_per_sm(const FunctionLimits& f, int block_size, size_t dynamic_shared) {
  if (block_size <= 0 || block_size > std::min(kMaxThreadsPerBlock, f.max_threads)) return 0;
  const int warps = divide_round_up(block_size, kWarpSize);
  int blocks = std::min(kMaxBlocksPerSm, kMaxThreadsPerSm / kWarpSize / warps);

  if (f.registers > kMaxRegistersPerThread) return 0;
  if (f.registers > 0) {
    constexpr int kSubPartitions = 4;
    const int per_warp =
        divide_round_up(f.registers * kWarpSize, kRegisterAllocationUnit) * kRegisterAllocationUnit;
    // The hardware checks a block as if its warps filled every sub-partition.
    const int assumed = per_warp * divide_round_up(warps, kSubPartitions) * kSubPartitions;
    if (assumed > kRegistersPerBlock) return 0;
    const int warps_per_sub_partition = kRegistersPerSm / kSubPartitions / per_warp;
    blocks = std::min(blocks, warps_per_sub_partition * kSubPartitions / warps);
  }

  // Dynamic shared memory beyond the function's maximum, or a block beyond
  // the opt-in limit, cannot launch at all.
  if (dynamic_shared > f.max_dynamic_shared) return 0;
  if (f.static_shared + dynamic_shared > static_cast<size_t>(kSharedPerBlockOptin)) return 0;
  const size_t per_block =
      (f.static_shared + dynamic_shared + kReservedSharedPerBlock + kSharedAllocationUnit - 1) /
      kSharedAllocationUnit * kSharedAllocationUnit;
  blocks = std::min(blocks, static_cast<int>(kSharedPerSm / per_block));
  return std::max(blocks, 0);
}

// SMs of GPC `gpc`: the device's SMs spread over the GPCs, the first ones
// taking the remainder.
int sms_in_gpc(const DeviceConfig& device, int gpc) {
  const int sms = static_cast<int>(device.sm_count);
  const int gpcs = std::min(kGpcCount, sms);
  if (gpc >= gpcs) return 0;
  return sms / gpcs + (gpc < sms % gpcs ? 1 : 0);
}

CUresult check_flags(unsigned flags) {
  return (flags & ~unsigned{CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE}) ? CUDA_ERROR_INVALID_VALUE
                                                                    : CUDA_SUCCESS;
}

CUresult max_active_blocks(int* numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize,
                           unsigned flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(numBlocks && blockSize > 0, CUDA_ERROR_INVALID_VALUE);
  if (CUresult r = check_flags(flags); r != CUDA_SUCCESS) return r;
  const DeviceConfig* device = nullptr;
  FunctionLimits f;
  if (CUresult r = read_function(func, &device, &f); r != CUDA_SUCCESS) return r;
  *numBlocks = blocks_per_sm(f, blockSize, dynamicSMemSize);
  return CUDA_SUCCESS;
}

// The block size with the most resident threads per SM, the largest such
// one on a tie, trying every multiple of the warp size up to the limit. The
// callback (user code) runs without any lock held.
CUresult max_potential_block_size(int* minGridSize, int* blockSize, CUfunction func,
                                  CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                  size_t dynamicSMemSize, int blockSizeLimit, unsigned flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(minGridSize && blockSize && blockSizeLimit >= 0, CUDA_ERROR_INVALID_VALUE);
  if (CUresult r = check_flags(flags); r != CUDA_SUCCESS) return r;
  const DeviceConfig* device = nullptr;
  FunctionLimits f;
  if (CUresult r = read_function(func, &device, &f); r != CUDA_SUCCESS) return r;
  int limit = std::min(kMaxThreadsPerBlock, f.max_threads);
  if (blockSizeLimit > 0) limit = std::min(limit, blockSizeLimit);
  int best_size = 0, best_blocks = 0, best_threads = 0;
  for (int size = divide_round_up(limit, kWarpSize) * kWarpSize; size > 0; size -= kWarpSize) {
    const int threads = std::min(size, limit);
    const size_t shared =
        blockSizeToDynamicSMemSize ? blockSizeToDynamicSMemSize(threads) : dynamicSMemSize;
    const int blocks = blocks_per_sm(f, threads, shared);
    if (blocks * threads > best_threads) {
      best_size = threads;
      best_blocks = blocks;
      best_threads = blocks * threads;
    }
    if (best_threads == kMaxThreadsPerSm) break;  // no smaller size can do better
  }
  *minGridSize = best_blocks * static_cast<int>(device->sm_count);
  *blockSize = best_size;
  return CUDA_SUCCESS;
}

// The cluster size a launch configuration asks for: its cluster dimension
// attribute, or the size the function was compiled with (the two must agree).
CUresult cluster_size(const FunctionLimits& f, const CUlaunchConfig& config, int* out) {
  int asked = 0;
  for (unsigned i = 0; i < config.numAttrs; ++i) {
    const CUlaunchAttribute& a = config.attrs[i];
    if (a.id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) continue;
    FAKECUDA_REQUIRE(
        a.value.clusterDim.x > 0 && a.value.clusterDim.y > 0 && a.value.clusterDim.z > 0,
        CUDA_ERROR_INVALID_CLUSTER_SIZE);
    asked = static_cast<int>(a.value.clusterDim.x * a.value.clusterDim.y * a.value.clusterDim.z);
  }
  int required = 0;
  if (f.required_cluster[0] > 0)
    required = f.required_cluster[0] * std::max(f.required_cluster[1], 1) *
               std::max(f.required_cluster[2], 1);
  FAKECUDA_REQUIRE(!required || !asked || asked == required, CUDA_ERROR_INVALID_CLUSTER_SIZE);
  const int size = required ? required : asked;
  FAKECUDA_REQUIRE(size > 0 && size <= kMaxClusterSize, CUDA_ERROR_INVALID_CLUSTER_SIZE);
  FAKECUDA_REQUIRE(size <= kPortableClusterSize || f.non_portable_cluster,
                   CUDA_ERROR_INVALID_CLUSTER_SIZE);
  *out = size;
  return CUDA_SUCCESS;
}

// The common start of the two cluster queries.
CUresult cluster_query(CUfunction func, const CUlaunchConfig* config, const DeviceConfig** device,
                       FunctionLimits* f, int* blocks) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(config && (config->numAttrs == 0 || config->attrs), CUDA_ERROR_INVALID_VALUE);
  if (CUresult r = read_function(func, device, f); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE((*device)->cc_major >= 9, CUDA_ERROR_NOT_SUPPORTED);
  const uint64_t threads = uint64_t{config->blockDimX} * config->blockDimY * config->blockDimZ;
  FAKECUDA_REQUIRE(threads > 0, CUDA_ERROR_INVALID_VALUE);
  *blocks =
      threads > INT_MAX ? 0 : blocks_per_sm(*f, static_cast<int>(threads), config->sharedMemBytes);
  return CUDA_SUCCESS;
}

}  // namespace

FAKECUDA_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks,
                                                                     CUfunction func, int blockSize,
                                                                     size_t dynamicSMemSize) {
  return max_active_blocks(numBlocks, func, blockSize, dynamicSMemSize, CU_OCCUPANCY_DEFAULT);
}

FAKECUDA_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags) {
  return max_active_blocks(numBlocks, func, blockSize, dynamicSMemSize, flags);
}

FAKECUDA_EXPORT CUresult cuOccupancyMaxPotentialBlockSize(
    int* minGridSize, int* blockSize, CUfunction func,
    CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit) {
  return max_potential_block_size(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
                                  dynamicSMemSize, blockSizeLimit, CU_OCCUPANCY_DEFAULT);
}

FAKECUDA_EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(
    int* minGridSize, int* blockSize, CUfunction func,
    CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit,
    unsigned int flags) {
  return max_potential_block_size(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
                                  dynamicSMemSize, blockSizeLimit, flags);
}

// The most dynamic shared memory each of `numBlocks` blocks of `blockSize`
// threads can have while all of them stay resident on one SM.
FAKECUDA_EXPORT CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize,
                                                                 CUfunction func, int numBlocks,
                                                                 int blockSize) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(dynamicSmemSize && blockSize > 0, CUDA_ERROR_INVALID_VALUE);
  const DeviceConfig* device = nullptr;
  FunctionLimits f;
  if (CUresult r = read_function(func, &device, &f); r != CUDA_SUCCESS) return r;
  // Without shared memory, the other limits must already allow the blocks.
  FAKECUDA_REQUIRE(numBlocks > 0 && blocks_per_sm(f, blockSize, 0) >= numBlocks,
                   CUDA_ERROR_INVALID_VALUE);
  const size_t share =
      kSharedPerSm / static_cast<size_t>(numBlocks) / kSharedAllocationUnit * kSharedAllocationUnit;
  const size_t overhead = f.static_shared + kReservedSharedPerBlock;
  size_t available = share > overhead ? share - overhead : 0;
  available = std::min(available, static_cast<size_t>(kSharedPerBlockOptin) -
                                      std::min(f.static_shared, size_t{kSharedPerBlockOptin}));
  *dynamicSmemSize = std::min(available, f.max_dynamic_shared);
  return CUDA_SUCCESS;
}

// The largest cluster that is sure to fit in any GPC with the
// configuration's blocks; the configuration's own cluster size is ignored.
FAKECUDA_EXPORT CUresult cuOccupancyMaxPotentialClusterSize(int* clusterSize, CUfunction func,
                                                            const CUlaunchConfig* config) {
  FAKECUDA_REQUIRE(clusterSize, CUDA_ERROR_INVALID_VALUE);
  const DeviceConfig* device = nullptr;
  FunctionLimits f;
  int blocks = 0;
  if (CUresult r = cluster_query(func, config, &device, &f, &blocks); r != CUDA_SUCCESS) return r;
  int limit = f.non_portable_cluster ? kMaxClusterSize : kPortableClusterSize;
  if (f.required_cluster[0] > 0)
    limit = f.required_cluster[0] * std::max(f.required_cluster[1], 1) *
            std::max(f.required_cluster[2], 1);
  int smallest_gpc = INT_MAX;
  for (int g = 0; g < kGpcCount; ++g)
    if (int sms = sms_in_gpc(*device, g); sms > 0) smallest_gpc = std::min(smallest_gpc, sms);
  *clusterSize = std::min(limit, smallest_gpc * blocks);
  return CUDA_SUCCESS;
}

// How many clusters of the configuration's size can be resident at once on
// the whole device.
FAKECUDA_EXPORT CUresult cuOccupancyMaxActiveClusters(int* numClusters, CUfunction func,
                                                      const CUlaunchConfig* config) {
  FAKECUDA_REQUIRE(numClusters, CUDA_ERROR_INVALID_VALUE);
  const DeviceConfig* device = nullptr;
  FunctionLimits f;
  int blocks = 0;
  if (CUresult r = cluster_query(func, config, &device, &f, &blocks); r != CUDA_SUCCESS) return r;
  int size = 0;
  if (CUresult r = cluster_size(f, *config, &size); r != CUDA_SUCCESS) return r;
  int clusters = 0;
  for (int g = 0; g < kGpcCount; ++g)
    clusters += sms_in_gpc(*device, g) * blocks / size;
  *numClusters = clusters;
  return CUDA_SUCCESS;
}
