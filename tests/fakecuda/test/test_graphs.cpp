// Graphs from stream capture and from explicit nodes, the rules of capture,
// and graph memory.
#include "support.h"

namespace fakecuda::test {
namespace {

constexpr unsigned long long kMs = 1'000'000;
constexpr size_t kMiB = 1ull << 20;

class Graphs : public ::testing::Test {
 protected:
  void SetUp() override {
    init_primary(0);
    spin_ = spin_kernel();
    ASSERT_CU(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
  }
  CUresult spin(CUstream stream, unsigned long long ns) {
    void* params[] = {&ns, &counter_};
    return cuLaunchKernel(spin_, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr);
  }
  float time_launch(CUgraphExec exec) {
    CUevent start = nullptr, end = nullptr;
    EXPECT_CU(cuEventCreate(&start, 0));
    EXPECT_CU(cuEventCreate(&end, 0));
    EXPECT_CU(cuEventRecord(start, stream_));
    EXPECT_CU(cuGraphLaunch(exec, stream_));
    EXPECT_CU(cuEventRecord(end, stream_));
    EXPECT_CU(cuEventSynchronize(end));
    float ms = 0;
    EXPECT_CU(cuEventElapsedTime(&ms, start, end));
    return ms;
  }
  CUfunction spin_ = nullptr;
  CUstream stream_ = nullptr;
  unsigned long long* counter_ = nullptr;
};

TEST_F(Graphs, CapturedWorkDoesNotRunUntilLaunched) {
  ASSERT_CU(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  ASSERT_CU(cuStreamIsCapturing(stream_, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  for (int i = 0; i < 3; ++i)
    ASSERT_CU(spin(stream_, 200 * kMs));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  // 600 ms captured, nothing ran: the stream is idle at once.
  EXPECT_CU(cuStreamQuery(stream_));
  size_t nodes = 0;
  ASSERT_CU(cuGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_EQ(nodes, 3u);
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  EXPECT_GE(time_launch(exec), 600.0f);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(Graphs, ExplicitKernelNodesRunInDependencyOrder) {
  CUgraph graph = nullptr;
  ASSERT_CU(cuGraphCreate(&graph, 0));
  unsigned long long ns = 10 * kMs;
  void* params[] = {&ns, &counter_};
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = spin_;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = params;
  CUgraphNode a = nullptr, b = nullptr, c = nullptr;
  ASSERT_CU(cuGraphAddKernelNode_v2(&a, graph, nullptr, 0, &p));
  ASSERT_CU(cuGraphAddKernelNode_v2(&b, graph, &a, 1, &p));
  CUgraphNode both[] = {a, b};
  ASSERT_CU(cuGraphAddKernelNode_v2(&c, graph, both, 2, &p));
  CUgraphNodeType type{};
  ASSERT_CU(cuGraphNodeGetType(c, &type));
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_KERNEL);
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  ASSERT_CU(cuGraphDestroy(graph));  // the executable graph stands alone
  EXPECT_GE(time_launch(exec), 30.0f);
  EXPECT_GE(time_launch(exec), 30.0f) << "relaunchable";
  ASSERT_CU(cuGraphExecDestroy(exec));
}

TEST_F(Graphs, SynchronisingACapturingStreamInvalidatesTheCapture) {
  ASSERT_CU(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(spin(stream_, kMs));
  EXPECT_EQ(cuStreamSynchronize(stream_), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUstreamCaptureStatus status{};
  ASSERT_CU(cuStreamIsCapturing(stream_, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  EXPECT_EQ(spin(stream_, kMs), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CUgraph graph = reinterpret_cast<CUgraph>(1);
  EXPECT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(graph, nullptr);
  ASSERT_CU(cuStreamIsCapturing(stream_, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
}

TEST_F(Graphs, GlobalCaptureForbidsUnsafeCallsEverywhere) {
  ASSERT_CU(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc_v2(&p, kMiB), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph graph = nullptr;
  EXPECT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

  // Relaxed capture allows them.
  ASSERT_CU(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT_CU(cuMemAlloc_v2(&p, kMiB));
  EXPECT_CU(cuMemFree_v2(p));
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(Graphs, LegacyStreamUseDuringCaptureIsAnImplicitDependency) {
  CUstream blocking = nullptr;
  ASSERT_CU(cuStreamCreate(&blocking, 0));
  ASSERT_CU(cuStreamBeginCapture_v2(blocking, CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT_EQ(spin(nullptr, kMs), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  CUgraph graph = nullptr;
  EXPECT_EQ(cuStreamEndCapture(blocking, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

TEST_F(Graphs, ForkedStreamsMustJoinBack) {
  CUstream side = nullptr;
  CUevent fork = nullptr, join = nullptr;
  ASSERT_CU(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuEventCreate(&fork, 0));
  ASSERT_CU(cuEventCreate(&join, 0));

  ASSERT_CU(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(cuEventRecord(fork, stream_));
  ASSERT_CU(cuStreamWaitEvent(side, fork, 0));  // side joins the capture
  ASSERT_CU(spin(side, 10 * kMs));
  ASSERT_CU(spin(stream_, 10 * kMs));
  ASSERT_CU(cuEventRecord(join, side));
  ASSERT_CU(cuStreamWaitEvent(stream_, join, 0));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  size_t nodes = 0;
  ASSERT_CU(cuGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_EQ(nodes, 2u);
  ASSERT_CU(cuGraphDestroy(graph));

  ASSERT_CU(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(cuEventRecord(fork, stream_));
  ASSERT_CU(cuStreamWaitEvent(side, fork, 0));
  ASSERT_CU(spin(side, 10 * kMs));
  EXPECT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
}

TEST_F(Graphs, CapturedStreamOrderedAllocationsBecomeGraphMemory) {
  size_t before = free_memory();
  ASSERT_CU(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAllocAsync(&p, 6 * kMiB, stream_));
  ASSERT_CU(spin(stream_, kMs));
  ASSERT_CU(cuMemFreeAsync(p, stream_));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  EXPECT_EQ(free_memory(), before) << "capturing allocates nothing";
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  time_launch(exec);
  cuuint64_t reserved = 0, used = 0;
  ASSERT_CU(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved));
  ASSERT_CU(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_EQ(reserved, 6 * kMiB);
  EXPECT_EQ(used, 0u);
  EXPECT_EQ(before - free_memory(), 6 * kMiB) << "the graph pool keeps its memory";
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_memory(), before);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(Graphs, ExplicitMemoryNodesOutliveTheLaunchUntilFreed) {
  CUgraph graph = nullptr;
  ASSERT_CU(cuGraphCreate(&graph, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.poolProps.location.id = 0;
  params.bytesize = 4 * kMiB;
  CUgraphNode alloc = nullptr;
  ASSERT_CU(cuGraphAddMemAllocNode(&alloc, graph, nullptr, 0, &params));
  ASSERT_NE(params.dptr, 0u);
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  const size_t before = free_memory();
  time_launch(exec);
  EXPECT_EQ(before - free_memory(), 4 * kMiB);
  unsigned value = 42, back = 0;
  ASSERT_CU(cuMemcpyHtoD_v2(params.dptr, &value, sizeof(value)));
  ASSERT_CU(cuMemcpyDtoH_v2(&back, params.dptr, sizeof(back)));
  EXPECT_EQ(back, 42u);
  ASSERT_CU(cuMemFreeAsync(params.dptr, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_memory(), before);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}

// A graph that allocates 4 MiB on device 0 and does not free it.
CUgraph graph_leaving_an_allocation(CUdeviceptr* dptr) {
  CUgraph graph = nullptr;
  EXPECT_CU(cuGraphCreate(&graph, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.poolProps.location.id = 0;
  params.bytesize = 4 * kMiB;
  CUgraphNode alloc = nullptr;
  EXPECT_CU(cuGraphAddMemAllocNode(&alloc, graph, nullptr, 0, &params));
  *dptr = params.dptr;
  return graph;
}

cuuint64_t graph_memory(CUgraphMem_attribute attribute) {
  cuuint64_t value = 0;
  EXPECT_CU(cuDeviceGetGraphMemAttribute(0, attribute, &value));
  return value;
}

// cuGraphLaunch: "If any allocations created by hGraphExec remain unfreed
// (from a previous launch) and hGraphExec was not instantiated with
// CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, the launch will fail with
// CUDA_ERROR_INVALID_VALUE", whether the earlier launch has run yet or not.
TEST_F(Graphs, RelaunchingWithItsAllocationOutstandingIsRefused) {
  CUdeviceptr dptr = 0;
  CUgraph graph = graph_leaving_an_allocation(&dptr);
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  const size_t before = free_memory();
  ASSERT_CU(spin(stream_, 100 * kMs));
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  EXPECT_EQ(cuGraphLaunch(exec, stream_), CUDA_ERROR_INVALID_VALUE) << "queued, not yet run";
  ASSERT_CU(cuStreamSynchronize(stream_));
  EXPECT_EQ(cuGraphLaunch(exec, stream_), CUDA_ERROR_INVALID_VALUE) << "run, not freed";
  ASSERT_CU(cuStreamSynchronize(stream_));
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 4 * kMiB);
  EXPECT_EQ(before - free_memory(), 4 * kMiB);

  // Freed, it may run again.
  ASSERT_CU(cuMemFreeAsync(dptr, stream_));
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 4 * kMiB);
  ASSERT_CU(cuMemFreeAsync(dptr, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_memory(), before);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}

// cuMemFree frees a graph allocation too, once the work queued on its device
// is done (it synchronises); the memory goes back to the graph pool.
TEST_F(Graphs, MemFreeFreesWhatALaunchLeftAfterTheQueuedWork) {
  CUdeviceptr dptr = 0;
  CUgraph graph = graph_leaving_an_allocation(&dptr);
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(spin(stream_, 50 * kMs));
  ASSERT_CU(cuMemFree_v2(dptr));
  EXPECT_EQ(cuStreamQuery(stream_), CUDA_SUCCESS) << "the queued work ran first";
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 4 * kMiB) << "kept by the pool";
  EXPECT_EQ(cuMemFree_v2(dptr), CUDA_ERROR_INVALID_VALUE) << "freed once";
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0u);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}

// With CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH each launch frees what
// the previous one left, as cuMemFreeAsync would: the memory is used again,
// not allocated anew.
TEST_F(Graphs, AutoFreeOnLaunchFreesWhatThePreviousLaunchLeft) {
  CUdeviceptr dptr = 0;
  CUgraph graph = graph_leaving_an_allocation(&dptr);
  CUgraphExec exec = nullptr;
  ASSERT_CU(
      cuGraphInstantiateWithFlags(&exec, graph, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
  const size_t before = free_memory();
  for (int launch = 0; launch < 4; ++launch) {
    ASSERT_CU(cuGraphLaunch(exec, stream_));
    ASSERT_CU(cuStreamSynchronize(stream_));
    EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 4 * kMiB) << "launch " << launch;
    EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 4 * kMiB);
    EXPECT_EQ(before - free_memory(), 4 * kMiB);
  }
  // Launched twice without a synchronisation in between, too.
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  EXPECT_EQ(graph_memory(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 4 * kMiB);
  EXPECT_EQ(before - free_memory(), 4 * kMiB);
  ASSERT_CU(cuMemFreeAsync(dptr, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  EXPECT_EQ(free_memory(), before);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(Graphs, EveryInstantiationVariantMakesALaunchableGraph) {
  CUgraph graph = nullptr;
  ASSERT_CU(cuGraphCreate(&graph, 0));
  CUgraphNode empty = nullptr;
  ASSERT_CU(cuGraphAddEmptyNode(&empty, graph, nullptr, 0));
  CUgraphExec execs[5] = {};
  char log[64] = "unchanged";
  ASSERT_CU(cuGraphInstantiate(&execs[0], graph, nullptr, log, sizeof(log)));
  EXPECT_STREQ(log, "unchanged") << "nothing to report";
  ASSERT_CU(cuGraphInstantiate_v2(&execs[1], graph, nullptr, nullptr, 0));
  ASSERT_CU(
      cuGraphInstantiateWithFlags(&execs[2], graph, CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY));
  CUDA_GRAPH_INSTANTIATE_PARAMS params{};
  params.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  params.hUploadStream = stream_;
  params.result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  ASSERT_CU(cuGraphInstantiateWithParams(&execs[3], graph, &params));
  EXPECT_EQ(params.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
  params.hUploadStream = nullptr;  // the per-thread default stream
  ASSERT_CU(cuGraphInstantiateWithParams_ptsz(&execs[4], graph, &params));
  EXPECT_EQ(params.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
  for (CUgraphExec exec : execs) {
    ASSERT_CU(cuGraphLaunch(exec, stream_));
    ASSERT_CU(cuGraphExecDestroy(exec));
  }
  ASSERT_CU(cuStreamSynchronize(stream_));
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(Graphs, InstantiationRefusesUnknownFlags) {
  CUgraph graph = nullptr;
  ASSERT_CU(cuGraphCreate(&graph, 0));
  CUgraphExec exec = nullptr;
  EXPECT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 1ull << 40), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphInstantiateWithFlags(&exec, graph,
                                        CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                            CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH),
            CUDA_ERROR_INVALID_VALUE);
  CUDA_GRAPH_INSTANTIATE_PARAMS params{};
  params.flags = 1ull << 40;
  EXPECT_EQ(cuGraphInstantiateWithParams(&exec, graph, &params), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(params.result_out, CUDA_GRAPH_INSTANTIATE_ERROR);
  EXPECT_EQ(cuGraphInstantiateWithParams(&exec, graph, nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(Graphs, AllocationNodesDescribeThemselves) {
  CUgraph graph = nullptr;
  ASSERT_CU(cuGraphCreate(&graph, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.poolProps.location.id = 0;
  params.bytesize = 6 * kMiB;
  CUgraphNode alloc = nullptr, empty = nullptr;
  ASSERT_CU(cuGraphAddMemAllocNode(&alloc, graph, nullptr, 0, &params));
  ASSERT_CU(cuGraphAddEmptyNode(&empty, graph, nullptr, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS read{};
  ASSERT_CU(cuGraphMemAllocNodeGetParams(alloc, &read));
  EXPECT_EQ(read.bytesize, 6 * kMiB);
  EXPECT_EQ(read.dptr, params.dptr);
  EXPECT_EQ(read.poolProps.allocType, CU_MEM_ALLOCATION_TYPE_PINNED);
  EXPECT_EQ(read.poolProps.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(read.poolProps.location.id, 0);
  EXPECT_EQ(cuGraphMemAllocNodeGetParams(empty, &read), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphMemAllocNodeGetParams(alloc, nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(Graphs, AChildGraphIsACopyThatRunsInsideItsParent) {
  int calls = 0;
  CUDA_HOST_NODE_PARAMS host{};
  host.fn = [](void* p) { ++*static_cast<int*>(p); };
  host.userData = &calls;
  CUgraph child = nullptr, parent = nullptr;
  ASSERT_CU(cuGraphCreate(&child, 0));
  CUgraphNode node = nullptr;
  ASSERT_CU(cuGraphAddHostNode(&node, child, nullptr, 0, &host));
  ASSERT_CU(cuGraphCreate(&parent, 0));
  CUgraphNode child_node = nullptr, after = nullptr;
  ASSERT_CU(cuGraphAddChildGraphNode(&child_node, parent, nullptr, 0, child));
  ASSERT_CU(cuGraphAddHostNode(&after, parent, &child_node, 1, &host));
  CUgraphNodeType type{};
  ASSERT_CU(cuGraphNodeGetType(child_node, &type));
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_GRAPH);
  CUgraph owned = nullptr;
  ASSERT_CU(cuGraphChildGraphNodeGetGraph(child_node, &owned));
  EXPECT_NE(owned, child) << "the node holds a copy";
  size_t nodes = 0;
  ASSERT_CU(cuGraphGetNodes(owned, nullptr, &nodes));
  EXPECT_EQ(nodes, 1u);
  EXPECT_EQ(cuGraphDestroy(owned), CUDA_ERROR_INVALID_VALUE) << "its parent owns it";
  ASSERT_CU(cuGraphDestroy(child));

  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, parent, 0));
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  EXPECT_EQ(calls, 2);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(parent));
}

TEST_F(Graphs, OnlyAMovedChildGraphMayAllocate) {
  CUgraph child = nullptr, parent = nullptr;
  ASSERT_CU(cuGraphCreate(&child, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS alloc{};
  alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  alloc.poolProps.location.id = 0;
  alloc.bytesize = 4 * kMiB;
  CUgraphNode alloc_node = nullptr, free_node = nullptr;
  ASSERT_CU(cuGraphAddMemAllocNode(&alloc_node, child, nullptr, 0, &alloc));
  ASSERT_CU(cuGraphAddMemFreeNode(&free_node, child, &alloc_node, 1, alloc.dptr));
  ASSERT_CU(cuGraphCreate(&parent, 0));
  CUgraphNode node = nullptr;
  EXPECT_EQ(cuGraphAddChildGraphNode(&node, parent, nullptr, 0, child), CUDA_ERROR_INVALID_VALUE)
      << "a copy could allocate twice";

  CUgraphNodeParams params{};
  params.type = CU_GRAPH_NODE_TYPE_GRAPH;
  params.graph.graph = child;
  params.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
  ASSERT_CU(cuGraphAddNode(&node, parent, nullptr, 0, &params));
  CUgraph owned = nullptr;
  ASSERT_CU(cuGraphChildGraphNodeGetGraph(node, &owned));
  EXPECT_EQ(owned, child) << "moved, not copied";
  EXPECT_EQ(cuGraphDestroy(child), CUDA_ERROR_INVALID_VALUE) << "its parent owns it now";
  params.graph.graph = parent;
  EXPECT_EQ(cuGraphAddNode(&node, child, nullptr, 0, &params), CUDA_ERROR_INVALID_VALUE)
      << "a graph cannot own its owner";

  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, parent, 0));
  time_launch(exec);
  cuuint64_t reserved = 0;
  ASSERT_CU(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved));
  EXPECT_EQ(reserved, 4 * kMiB);
  ASSERT_CU(cuDeviceGraphMemTrim(0));
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(parent));  // and the child with it
}

TEST_F(Graphs, AddNodeSimulatesEmptyAndAllocationNodes) {
  CUgraph graph = nullptr;
  ASSERT_CU(cuGraphCreate(&graph, 0));
  CUgraphNodeParams params{};
  params.type = CU_GRAPH_NODE_TYPE_EMPTY;
  CUgraphNode empty = nullptr, alloc = nullptr, other = nullptr;
  ASSERT_CU(cuGraphAddNode(&empty, graph, nullptr, 0, &params));
  params = CUgraphNodeParams{};
  params.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  params.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.alloc.bytesize = 2 * kMiB;
  ASSERT_CU(cuGraphAddNode_v2(&alloc, graph, &empty, nullptr, 1, &params));
  EXPECT_NE(params.alloc.dptr, 0u);
  CUDA_MEM_ALLOC_NODE_PARAMS read{};
  ASSERT_CU(cuGraphMemAllocNodeGetParams(alloc, &read));
  EXPECT_EQ(read.bytesize, 2 * kMiB);
  params = CUgraphNodeParams{};
  params.type = CU_GRAPH_NODE_TYPE_KERNEL;
  EXPECT_EQ(cuGraphAddNode(&other, graph, nullptr, 0, &params), CUDA_ERROR_NOT_SUPPORTED);
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(Graphs, HostAndEmptyNodes) {
  CUgraph graph = nullptr;
  ASSERT_CU(cuGraphCreate(&graph, 0));
  int calls = 0;
  CUDA_HOST_NODE_PARAMS host{};
  host.fn = [](void* p) { ++*static_cast<int*>(p); };
  host.userData = &calls;
  CUgraphNode empty = nullptr, node = nullptr;
  ASSERT_CU(cuGraphAddEmptyNode(&empty, graph, nullptr, 0));
  ASSERT_CU(cuGraphAddHostNode(&node, graph, &empty, 1, &host));
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(cuGraphLaunch_ptsz(exec, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  EXPECT_EQ(calls, 2);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}

}  // namespace
}  // namespace fakecuda::test
