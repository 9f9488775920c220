// The occupancy calculator against the rules of NVIDIA's (cuda_occupancy.h)
// for the simulated H100: the test kernels use 16 registers, no static
// shared memory and at most 48 KiB of dynamic shared memory (what
// cuFuncGetAttribute reports for them), so warps and shared memory set the
// limits. Cluster queries as cuBLAS makes them: sizes 1 to 32.
#include "support.h"

namespace fakecuda::test {
namespace {

class Occupancy : public testing::Test {
 protected:
  void SetUp() override {
    init_primary();
    func_ = plain_kernel();
  }

  int blocks(int block_size, size_t shared = 0) {
    int n = -1;
    EXPECT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, func_, block_size, shared));
    return n;
  }

  CUlaunchConfig cluster_config(unsigned threads, unsigned shared, unsigned x, unsigned y = 1) {
    attribute_.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attribute_.value.clusterDim.x = x;
    attribute_.value.clusterDim.y = y;
    attribute_.value.clusterDim.z = 1;
    CUlaunchConfig config{};
    config.gridDimX = 132;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = threads;
    config.blockDimY = config.blockDimZ = 1;
    config.sharedMemBytes = shared;
    config.attrs = &attribute_;
    config.numAttrs = 1;
    return config;
  }

  CUfunction func_ = nullptr;
  CUlaunchAttribute attribute_{};
};

TEST_F(Occupancy, WarpsAndBlocksLimitSmallKernels) {
  EXPECT_EQ(blocks(32), 32);   // 32 blocks per SM at most
  EXPECT_EQ(blocks(128), 16);  // 64 warps per SM
  EXPECT_EQ(blocks(100), 16);  // a partial warp takes a whole one
  EXPECT_EQ(blocks(1024), 2);
  EXPECT_EQ(blocks(2048), 0);  // more threads than a block may have
}

TEST_F(Occupancy, SharedMemoryLimitsBlocksWithTheDriversReserve) {
  // 48 KiB + the 1 KiB reserve per block: four fit in 228 KiB.
  EXPECT_EQ(blocks(128, 48 << 10), 4);
  // 10 KiB + 1 KiB: 20 blocks' worth, but warps allow 16.
  EXPECT_EQ(blocks(128, 10 << 10), 16);
  EXPECT_EQ(blocks(64, 10 << 10), 20);
  // Beyond the function's maximum dynamic shared memory nothing launches.
  EXPECT_EQ(blocks(128, (48 << 10) + 1), 0);
}

TEST_F(Occupancy, ArgumentsAreChecked) {
  int n = 0;
  EXPECT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(nullptr, func_, 128, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, func_, 0, 0), CUDA_ERROR_INVALID_VALUE);
  int not_a_function = 0;
  EXPECT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &n, reinterpret_cast<CUfunction>(&not_a_function), 128, 0),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
      &n, func_, 128, 0, CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE));
  EXPECT_EQ(n, 16);
  EXPECT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, func_, 128, 0, 2),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Occupancy, PotentialBlockSizeFillsTheSm) {
  int grid = 0, block = 0;
  ASSERT_CU(cuOccupancyMaxPotentialBlockSize(&grid, &block, func_, nullptr, 0, 0));
  EXPECT_EQ(block, 1024);
  EXPECT_EQ(grid, 2 * 132);
  ASSERT_CU(cuOccupancyMaxPotentialBlockSize(&grid, &block, func_, nullptr, 0, 100));
  EXPECT_LE(block, 100);
  EXPECT_EQ(cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, func_, nullptr, 0, 0, 4),
            CUDA_ERROR_INVALID_VALUE);
}

size_t sixty_four_bytes_per_thread(int block_size) {
  return static_cast<size_t>(block_size) * 64;
}

TEST_F(Occupancy, PotentialBlockSizeAsksTheCallbackForEachSize) {
  // 1024 threads would need 64 KiB (too much), 768 fit twice (1536
  // threads), 512 fit four times: the whole SM.
  int grid = 0, block = 0;
  ASSERT_CU(
      cuOccupancyMaxPotentialBlockSize(&grid, &block, func_, sixty_four_bytes_per_thread, 0, 0));
  EXPECT_EQ(block, 512);
  EXPECT_EQ(grid, 4 * 132);
}

TEST_F(Occupancy, AvailableDynamicSharedMemoryLetsTheBlocksFit) {
  size_t bytes = 0;
  ASSERT_CU(cuOccupancyAvailableDynamicSMemPerBlock(&bytes, func_, 1, 128));
  EXPECT_EQ(bytes, 48u << 10);  // capped by the function's maximum
  ASSERT_CU(cuOccupancyAvailableDynamicSMemPerBlock(&bytes, func_, 8, 128));
  EXPECT_EQ(bytes, (228u << 10) / 8 - (1u << 10));
  EXPECT_GE(blocks(128, bytes), 8);
  EXPECT_LT(blocks(128, bytes + 128), 8);
  // 17 blocks of 128 threads never fit, whatever their shared memory.
  EXPECT_EQ(cuOccupancyAvailableDynamicSMemPerBlock(&bytes, func_, 17, 128),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Occupancy, ClustersFitInTheGpcs) {
  // 132 SMs in 8 GPCs (four of 17, four of 16); 48 KiB blocks: 4 per SM.
  int size = 0;
  CUlaunchConfig config = cluster_config(128, 48 << 10, 1);
  ASSERT_CU(cuOccupancyMaxPotentialClusterSize(&size, func_, &config));
  EXPECT_EQ(size, 8);  // portable clusters only
  int clusters = 0;
  config = cluster_config(128, 48 << 10, 8);
  ASSERT_CU(cuOccupancyMaxActiveClusters(&clusters, func_, &config));
  EXPECT_EQ(clusters, 4 * (17 * 4 / 8) + 4 * (16 * 4 / 8));
  config = cluster_config(128, 48 << 10, 2, 2);
  ASSERT_CU(cuOccupancyMaxActiveClusters(&clusters, func_, &config));
  EXPECT_EQ(clusters, 4 * (17 * 4 / 4) + 4 * (16 * 4 / 4));
}

TEST_F(Occupancy, ClusterSizesAsCublasAsksThem) {
  // 128 threads with the whole opt-in shared memory, which this function
  // has not been allowed: no cluster is resident, sizes past 8 are refused.
  for (unsigned size = 1; size <= 32; ++size) {
    int clusters = -1;
    CUlaunchConfig config = cluster_config(128, 227 << 10, size);
    const CUresult r = cuOccupancyMaxActiveClusters(&clusters, func_, &config);
    if (size <= 8) {
      EXPECT_CU(r) << "size " << size;
      EXPECT_EQ(clusters, 0) << "size " << size;
    } else {
      EXPECT_EQ(r, CUDA_ERROR_INVALID_CLUSTER_SIZE) << "size " << size;
    }
  }
}

TEST_F(Occupancy, ActiveClustersNeedAClusterSize) {
  int clusters = 0;
  CUlaunchConfig config = cluster_config(128, 0, 1);
  config.numAttrs = 0;
  EXPECT_EQ(cuOccupancyMaxActiveClusters(&clusters, func_, &config),
            CUDA_ERROR_INVALID_CLUSTER_SIZE);
  EXPECT_EQ(cuOccupancyMaxActiveClusters(&clusters, func_, nullptr), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace fakecuda::test
