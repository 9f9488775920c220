// Run with libgpulimit.so preloaded on the simulated driver, as a tenant
// capped at 1 GiB on each of two devices whose contexts take no memory: a
// graph's allocation nodes are charged when it is instantiated, through every
// instantiation variant, per device; a graph over the cap is refused with
// nothing created. After the executable graph is destroyed what its launches
// left allocated stays charged until it is freed, and the graph memory pool's
// reserve until it is trimmed: what the device really holds (device_truth.h)
// never exceeds the cap.
#include <cuda.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device_truth.h"
#include "preloaded_main.h"

namespace {

constexpr size_t kMiB = 1ull << 20;
constexpr size_t kGiB = 1ull << 30;

#define ASSERT_CU(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call

// Each way to instantiate a graph, by the name the driver exports.
enum class Variant { kV1, kV2, kWithFlags, kWithParams, kWithParamsPtsz };

std::string name(Variant variant) {
  switch (variant) {
    case Variant::kV1:
      return "cuGraphInstantiate";
    case Variant::kV2:
      return "cuGraphInstantiate_v2";
    case Variant::kWithFlags:
      return "cuGraphInstantiateWithFlags";
    case Variant::kWithParams:
      return "cuGraphInstantiateWithParams";
    case Variant::kWithParamsPtsz:
      return "cuGraphInstantiateWithParams_ptsz";
  }
  return "?";
}

// Instantiates through `variant`; `params`, when given, receives what the
// variants with parameters report.
CUresult instantiate(Variant variant, CUgraphExec* exec, CUgraph graph,
                     CUDA_GRAPH_INSTANTIATE_PARAMS* params = nullptr) {
  CUDA_GRAPH_INSTANTIATE_PARAMS own{};
  if (!params) params = &own;
  switch (variant) {
    case Variant::kV1:
      return cuGraphInstantiate(exec, graph, nullptr, nullptr, 0);
    case Variant::kV2:
      return cuGraphInstantiate_v2(exec, graph, nullptr, nullptr, 0);
    case Variant::kWithFlags:
      return cuGraphInstantiateWithFlags(exec, graph, 0);
    case Variant::kWithParams:
      return cuGraphInstantiateWithParams(exec, graph, params);
    case Variant::kWithParamsPtsz:
      return cuGraphInstantiateWithParams_ptsz(exec, graph, params);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

class GraphMemory : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CU(cuInit(0));  // joins the tenant
    for (int device = 0; device < 2; ++device)
      ASSERT_CU(cuDevicePrimaryCtxRetain(&contexts_[device], device));
    ASSERT_CU(cuCtxSetCurrent(contexts_[0]));
    ASSERT_CU(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
  }
  void TearDown() override {
    for (CUgraph graph : graphs_)
      cuGraphDestroy(graph);
    cuStreamDestroy_v2(stream_);
  }

  // What the tenant has left on `device`, as cuMemGetInfo reports it there.
  size_t free_on(int device) {
    CUcontext current = nullptr;
    cuCtxGetCurrent(&current);
    cuCtxSetCurrent(contexts_[device]);
    size_t free = 0, total = 0;
    EXPECT_EQ(cuMemGetInfo_v2(&free, &total), CUDA_SUCCESS);
    EXPECT_EQ(total, kGiB);
    cuCtxSetCurrent(current);
    return free;
  }

  // A graph that allocates `bytes` on each device listed, and frees them.
  CUgraph graph_allocating(const std::vector<std::pair<int, size_t>>& allocations) {
    CUgraph graph = nullptr;
    EXPECT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
    graphs_.push_back(graph);
    for (const auto& [device, bytes] : allocations) {
      CUDA_MEM_ALLOC_NODE_PARAMS params{};
      params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      params.poolProps.location.id = device;
      params.bytesize = bytes;
      CUgraphNode alloc = nullptr, free = nullptr;
      EXPECT_EQ(cuGraphAddMemAllocNode(&alloc, graph, nullptr, 0, &params), CUDA_SUCCESS);
      EXPECT_EQ(cuGraphAddMemFreeNode(&free, graph, &alloc, 1, params.dptr), CUDA_SUCCESS);
    }
    return graph;
  }
  CUgraph graph_allocating(size_t bytes) { return graph_allocating({{0, bytes}}); }

  // A graph that allocates `bytes` on device 0 and leaves it allocated;
  // `*ptr` receives the allocation's address.
  CUgraph graph_leaving(size_t bytes, CUdeviceptr* ptr) {
    CUgraph graph = nullptr;
    EXPECT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
    graphs_.push_back(graph);
    CUDA_MEM_ALLOC_NODE_PARAMS params{};
    params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params.poolProps.location.id = 0;
    params.bytesize = bytes;
    CUgraphNode alloc = nullptr;
    EXPECT_EQ(cuGraphAddMemAllocNode(&alloc, graph, nullptr, 0, &params), CUDA_SUCCESS);
    *ptr = params.dptr;
    return graph;
  }

  // A graph that only frees `ptr`, another graph's allocation.
  CUgraph graph_freeing(CUdeviceptr ptr) {
    CUgraph graph = nullptr;
    EXPECT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
    graphs_.push_back(graph);
    CUgraphNode free = nullptr;
    EXPECT_EQ(cuGraphAddMemFreeNode(&free, graph, nullptr, 0, ptr), CUDA_SUCCESS);
    return graph;
  }

  // Instantiates `graph`, launches it once and waits for it.
  CUresult run(CUgraph graph, CUgraphExec* exec, unsigned long long flags = 0) {
    if (CUresult r = cuGraphInstantiateWithFlags(exec, graph, flags); r != CUDA_SUCCESS) return r;
    if (CUresult r = cuGraphLaunch(*exec, stream_); r != CUDA_SUCCESS) return r;
    return cuStreamSynchronize(stream_);
  }

  // What device 0 really holds: not what the hooks believe.
  static uint64_t held_on_device() { return intercept_test::device_used(0); }

  CUcontext contexts_[2] = {};
  CUstream stream_ = nullptr;
  std::vector<CUgraph> graphs_;
};

class GraphInstantiation : public GraphMemory, public testing::WithParamInterface<Variant> {};

TEST_P(GraphInstantiation, ChargesTheAllocationNodesThenWhatThePoolKeepsUntilTrimmed) {
  const size_t before = free_on(0);
  ASSERT_EQ(before, kGiB);
  CUgraph graph = graph_allocating({{0, 192 * kMiB}, {0, 64 * kMiB}});
  EXPECT_EQ(free_on(0), before) << "building a graph takes nothing";

  CUgraphExec exec = nullptr;
  ASSERT_CU(instantiate(GetParam(), &exec, graph));
  EXPECT_EQ(free_on(0), before - 256 * kMiB) << "every allocation node, summed";
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  EXPECT_EQ(free_on(0), before - 256 * kMiB) << "launching adds nothing";

  ASSERT_CU(cuGraphExecDestroy(exec));
  EXPECT_EQ(free_on(0), before - 256 * kMiB) << "the pool keeps what it backed";
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_on(0), before) << "until it is trimmed";
}

TEST_P(GraphInstantiation, OverTheCapIsOutOfMemoryAndChangesNothing) {
  const size_t before = free_on(0);
  CUgraph too_large = graph_allocating(before + 2 * kMiB);
  auto* const untouched = reinterpret_cast<CUgraphExec>(0x5a5a);
  CUgraphExec exec = untouched;
  CUDA_GRAPH_INSTANTIATE_PARAMS params{};
  params.result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  EXPECT_EQ(instantiate(GetParam(), &exec, too_large, &params), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(exec, untouched);
  EXPECT_EQ(free_on(0), before);
  if (GetParam() == Variant::kWithParams || GetParam() == Variant::kWithParamsPtsz) {
    EXPECT_EQ(params.result_out, CUDA_GRAPH_INSTANTIATE_ERROR);
  }

  // Exactly what is left fits.
  CUgraph fits = graph_allocating(before);
  ASSERT_CU(instantiate(GetParam(), &exec, fits));
  EXPECT_EQ(free_on(0), 0u);
  ASSERT_CU(cuGraphExecDestroy(exec));
  EXPECT_EQ(free_on(0), before);
}

struct VariantName {
  std::string operator()(const testing::TestParamInfo<Variant>& param) const {
    return name(param.param);
  }
};

INSTANTIATE_TEST_SUITE_P(EveryVariant, GraphInstantiation,
                         testing::Values(Variant::kV1, Variant::kV2, Variant::kWithFlags,
                                         Variant::kWithParams, Variant::kWithParamsPtsz),
                         VariantName());

TEST_F(GraphMemory, CapturedStreamOrderedAllocationsAreChargedAtInstantiation) {
  const size_t before = free_on(0);
  ASSERT_CU(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAllocAsync(&a, 128 * kMiB, stream_));
  ASSERT_CU(cuMemAllocAsync(&b, 64 * kMiB, stream_));
  ASSERT_CU(cuMemFreeAsync(b, stream_));
  ASSERT_CU(cuMemFreeAsync(a, stream_));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  graphs_.push_back(graph);
  EXPECT_EQ(free_on(0), before) << "capturing allocates nothing";

  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  EXPECT_EQ(free_on(0), before - 192 * kMiB);
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  ASSERT_CU(cuGraphExecDestroy(exec));
  EXPECT_EQ(free_on(0), before - 192 * kMiB) << "the pool keeps what it backed";
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_on(0), before);
}

TEST_F(GraphMemory, AFailedInstantiationGivesTheChargeBack) {
  const size_t before = free_on(0);
  CUgraph graph = graph_allocating(256 * kMiB);
  CUgraphExec exec = nullptr;
  EXPECT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 1ull << 40), CUDA_ERROR_INVALID_VALUE)
      << "no such flag";
  EXPECT_EQ(free_on(0), before);
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  EXPECT_EQ(free_on(0), before - 256 * kMiB);
  ASSERT_CU(cuGraphExecDestroy(exec));
}

TEST_F(GraphMemory, EachDeviceIsChargedTheNodesThatAllocateThere) {
  CUgraph graph = graph_allocating({{0, 128 * kMiB}, {1, 512 * kMiB}});
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  EXPECT_EQ(free_on(0), kGiB - 128 * kMiB);
  EXPECT_EQ(free_on(1), kGiB - 512 * kMiB);

  // Over the cap on device 1 only: device 0 is not charged either.
  CUgraph too_large = graph_allocating({{0, 128 * kMiB}, {1, 514 * kMiB}});
  CUgraphExec refused = nullptr;
  EXPECT_EQ(cuGraphInstantiateWithFlags(&refused, too_large, 0), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(free_on(0), kGiB - 128 * kMiB);
  EXPECT_EQ(free_on(1), kGiB - 512 * kMiB);

  ASSERT_CU(cuGraphExecDestroy(exec));
  EXPECT_EQ(free_on(0), kGiB);
  EXPECT_EQ(free_on(1), kGiB);
}

TEST_F(GraphMemory, ChildGraphsItOwnsAreCountedAtEveryDepth) {
  // parent -> child (64M) -> grandchild (128M), each moved into its parent.
  CUgraph grandchild = graph_allocating(128 * kMiB);
  CUgraph child = graph_allocating(64 * kMiB);
  CUgraph parent = nullptr;
  ASSERT_CU(cuGraphCreate(&parent, 0));
  graphs_ = {parent};  // the parent owns the others once they move
  CUgraphNodeParams params{};
  params.type = CU_GRAPH_NODE_TYPE_GRAPH;
  params.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
  CUgraphNode node = nullptr;
  params.graph.graph = grandchild;
  ASSERT_CU(cuGraphAddNode(&node, child, nullptr, 0, &params));
  params.graph.graph = child;
  ASSERT_CU(cuGraphAddNode(&node, parent, nullptr, 0, &params));

  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, parent, 0));
  EXPECT_EQ(free_on(0), kGiB - 192 * kMiB);
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_on(0), kGiB);
}

TEST_F(GraphMemory, AGraphWithoutAllocationNodesTakesNothing) {
  CUgraph graph = nullptr;
  ASSERT_CU(cuGraphCreate(&graph, 0));
  graphs_.push_back(graph);
  CUgraphNode empty = nullptr;
  ASSERT_CU(cuGraphAddEmptyNode(&empty, graph, nullptr, 0));
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  EXPECT_EQ(free_on(0), kGiB);
  ASSERT_CU(cuGraphExecDestroy(exec));
}

// The escape: a graph that does not free what it allocates, instantiated,
// launched and destroyed again and again, each cycle leaving its allocation
// alive. Only four cycles of 256 MiB fit under 1 GiB.
TEST_F(GraphMemory, CyclesThatLeaveAllocationsAliveCannotHoldMoreThanTheCap) {
  int cycles = 0;
  for (int i = 0; i < 8; ++i) {
    CUdeviceptr ptr = 0;
    CUgraph graph = graph_leaving(256 * kMiB, &ptr);
    CUgraphExec exec = nullptr;
    const CUresult result = run(graph, &exec);
    if (result == CUDA_ERROR_OUT_OF_MEMORY) break;
    ASSERT_CU(result);
    ASSERT_CU(cuGraphExecDestroy(exec));
    ++cycles;
  }
  EXPECT_EQ(cycles, 4);
  EXPECT_EQ(free_on(0), 0u);
  EXPECT_LE(held_on_device(), kGiB);
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_on(0), 0u) << "trimming cannot give back what is still allocated";
}

TEST_F(GraphMemory, WhatALaunchLeftStaysChargedUntilFreedAndTrimmed) {
  CUdeviceptr ptr = 0;
  CUgraph graph = graph_leaving(256 * kMiB, &ptr);
  CUgraphExec exec = nullptr;
  ASSERT_CU(run(graph, &exec));
  ASSERT_CU(cuGraphExecDestroy(exec));
  EXPECT_EQ(free_on(0), kGiB - 256 * kMiB) << "the allocation outlives its graph";
  EXPECT_GE(held_on_device(), 256 * kMiB);

  ASSERT_CU(cuMemFree_v2(ptr));
  EXPECT_EQ(free_on(0), kGiB - 256 * kMiB) << "freed into the graph pool, which keeps it";
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_on(0), kGiB);
  EXPECT_EQ(held_on_device(), 0u);
}

TEST_F(GraphMemory, AnExecutableGraphNeverLaunchedLeavesNothing) {
  CUdeviceptr ptr = 0;
  CUgraph graph = graph_leaving(256 * kMiB, &ptr);
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  EXPECT_EQ(free_on(0), kGiB - 256 * kMiB);
  ASSERT_CU(cuGraphExecDestroy(exec));
  EXPECT_EQ(free_on(0), kGiB);
}

TEST_F(GraphMemory, AnotherGraphsFreeNodeFreesWhatALaunchLeft) {
  CUdeviceptr ptr = 0;
  CUgraph leaving = graph_leaving(512 * kMiB, &ptr);
  CUgraphExec first = nullptr;
  ASSERT_CU(run(leaving, &first));
  ASSERT_CU(cuGraphExecDestroy(first));
  EXPECT_EQ(free_on(0), kGiB - 512 * kMiB);

  CUgraph freeing = graph_freeing(ptr);
  CUgraphExec second = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&second, freeing, 0));
  EXPECT_EQ(free_on(0), kGiB - 512 * kMiB) << "a free node takes nothing";
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_on(0), kGiB - 512 * kMiB) << "not freed before the graph that frees it runs";
  ASSERT_CU(cuGraphLaunch(second, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_on(0), kGiB);
  ASSERT_CU(cuGraphExecDestroy(second));
  EXPECT_EQ(held_on_device(), 0u);
}

TEST_F(GraphMemory, AFreeOnACapturingStreamFreesOnlyWhenItsGraphRuns) {
  CUdeviceptr ptr = 0;
  CUgraph leaving = graph_leaving(256 * kMiB, &ptr);
  CUgraphExec first = nullptr;
  ASSERT_CU(run(leaving, &first));
  ASSERT_CU(cuGraphExecDestroy(first));

  ASSERT_CU(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(cuMemFreeAsync(ptr, stream_));
  CUgraph captured = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &captured));
  graphs_.push_back(captured);
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_on(0), kGiB - 256 * kMiB) << "captured, not freed";

  CUgraphExec second = nullptr;
  ASSERT_CU(run(captured, &second));
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_on(0), kGiB);
  ASSERT_CU(cuGraphExecDestroy(second));
}

TEST_F(GraphMemory, AStreamOrderedFreeGivesItBackToThePool) {
  CUdeviceptr ptr = 0;
  CUgraph leaving = graph_leaving(256 * kMiB, &ptr);
  CUgraphExec exec = nullptr;
  ASSERT_CU(run(leaving, &exec));
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuMemFreeAsync(ptr, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_on(0), kGiB);
}

// With CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH each launch frees
// what the last one left: one allocation alive however often it runs.
TEST_F(GraphMemory, AutoFreeOnLaunchKeepsOneAllocationAlive) {
  CUdeviceptr ptr = 0;
  CUgraph graph = graph_leaving(256 * kMiB, &ptr);
  CUgraphExec exec = nullptr;
  ASSERT_CU(run(graph, &exec, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
  for (int i = 0; i < 3; ++i)
    ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  EXPECT_EQ(free_on(0), kGiB - 256 * kMiB);
  ASSERT_CU(cuGraphExecDestroy(exec));
  EXPECT_EQ(free_on(0), kGiB - 256 * kMiB);
  EXPECT_LE(held_on_device(), 256 * kMiB);
  ASSERT_CU(cuMemFree_v2(ptr));
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_on(0), kGiB);
}

// A graph may be instantiated again once its executable graph is gone, while
// what that one's launch left is still allocated at the same address.
TEST_F(GraphMemory, InstantiatedAgainWhileItsAllocationLives) {
  CUdeviceptr ptr = 0;
  CUgraph graph = graph_leaving(256 * kMiB, &ptr);
  CUgraphExec first = nullptr;
  ASSERT_CU(run(graph, &first));
  ASSERT_CU(cuGraphExecDestroy(first));

  CUgraphExec second = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&second, graph, 0));
  EXPECT_EQ(free_on(0), kGiB - 512 * kMiB) << "the live allocation and the new bound";
  EXPECT_NE(cuGraphLaunch(second, stream_), CUDA_SUCCESS) << "its allocation is still live";
  ASSERT_CU(cuMemFree_v2(ptr));
  EXPECT_EQ(free_on(0), kGiB - 256 * kMiB);
  ASSERT_CU(cuGraphLaunch(second, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  ASSERT_CU(cuGraphExecDestroy(second));
  EXPECT_EQ(free_on(0), kGiB - 256 * kMiB) << "left alive by the second launch";
  ASSERT_CU(cuMemFree_v2(ptr));
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_on(0), kGiB);
}

}  // namespace

// The test process is the tenant.
int main(int argc, char** argv) {
  return intercept_test::run_preloaded(argc, argv,
                                       {{"LD_PRELOAD", GPULIMIT_LIBRARY_PATH},
                                        {"GPULIMIT_MEM", "1G"},
                                        {"GPULIMIT_TENANT", "graph-memory"},
                                        {"GPULIMIT_LEDGER_DIR", "$GPULIMIT_TEST_DIR"},
                                        {"FAKECUDA_DEVICES", "2"},
                                        {"FAKECUDA_MEM", "4G"},
                                        {"FAKECUDA_CTX_MEM", "0"}});
}
