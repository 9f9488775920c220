// Graph memory: what a graph's memory-allocation nodes take, whether added
// with cuGraphAddMemAllocNode (or cuGraphAddNode) or made by cuMemAllocAsync
// on a capturing stream. The driver backs them from its per-device graph
// memory pool when the graph is launched; gpulimit charges them earlier, when
// the graph is instantiated, so that a graph over the cap is refused before
// it can run: the sizes of its allocation nodes (those of child graphs it
// owns included), summed per device (the node's own location), are reserved
// against the cap before the real instantiation, and given back if it fails.
// Over the cap the instantiation returns CUDA_ERROR_OUT_OF_MEMORY and nothing
// is created. What stays charged after the executable graph is destroyed (a
// launch's allocations the graph does not free, the pool's reserve) is kept
// by graph_books.h; the launch hooks, cuMemFree[Async] and
// cuDeviceGraphMemTrim tell it what happened.
#include <algorithm>
#include <memory>
#include <new>

#include "memory/accounting.h"
#include "memory/graph_books.h"

using namespace gpulimit;
using graph_books::Footprint;

namespace {

enum class Reading {
  kRead,
  kUnreadable,  // the driver would not describe the graph: it reports that itself
  kUncounted,   // no room to list the nodes, or nested too deep: refused, not let through
};

// Child graphs nest; a graph nested deeper than this is refused.
constexpr int kMaxDepth = 64;

// Adds the memory nodes of `graph`, and of the child graphs it owns, to
// `footprint`: allocation nodes to `all`, the addresses free nodes free to
// `frees`. Child graphs may hold memory nodes when the parent owns them
// (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE); conditional bodies may not.
Reading add_graph_memory(Tenant* tenant, CUgraph graph, int depth, Footprint& footprint,
                         std::vector<graph_books::Allocation>& all,
                         std::vector<CUdeviceptr>& frees) {
  auto get_nodes = real_function(real::cuGraphGetNodes);
  auto get_type = real_function(real::cuGraphNodeGetType);
  auto get_alloc = real_function(real::cuGraphMemAllocNodeGetParams);
  auto get_free = real_function(real::cuGraphMemFreeNodeGetParams);
  auto get_child = real_function(real::cuGraphChildGraphNodeGetGraph);
  // A driver before 11.4 has no memory nodes to count.
  if (!get_nodes || !get_type || !get_alloc || !get_free) return Reading::kUnreadable;
  if (depth > kMaxDepth) return Reading::kUncounted;
  size_t count = 0;
  if (get_nodes(graph, nullptr, &count) != CUDA_SUCCESS) return Reading::kUnreadable;
  if (count == 0) return Reading::kRead;
  std::unique_ptr<CUgraphNode[]> nodes(new (std::nothrow) CUgraphNode[count]);
  if (!nodes) return Reading::kUncounted;
  size_t listed = count;
  if (get_nodes(graph, nodes.get(), &listed) != CUDA_SUCCESS) return Reading::kUnreadable;
  for (size_t i = 0; i < std::min(count, listed); ++i) {
    CUgraphNodeType type{};
    if (get_type(nodes[i], &type) != CUDA_SUCCESS) return Reading::kUnreadable;
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      CUDA_MEM_ALLOC_NODE_PARAMS params{};
      if (get_alloc(nodes[i], &params) != CUDA_SUCCESS) return Reading::kUnreadable;
      if (params.poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE) continue;
      const CUdevice ordinal = params.poolProps.location.id;
      const int device = tenant->ledger_device(ordinal);
      if (device < 0) continue;
      footprint.bytes[device] += params.bytesize;
      footprint.ordinal[device] = ordinal;
      all.push_back({params.dptr, device, ordinal, params.bytesize});
    } else if (type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
      CUdeviceptr ptr = 0;
      if (get_free(nodes[i], &ptr) != CUDA_SUCCESS) return Reading::kUnreadable;
      frees.push_back(ptr);
    } else if (type == CU_GRAPH_NODE_TYPE_GRAPH && get_child) {
      CUgraph child = nullptr;
      if (get_child(nodes[i], &child) != CUDA_SUCCESS) return Reading::kUnreadable;
      if (Reading r = add_graph_memory(tenant, child, depth + 1, footprint, all, frees);
          r != Reading::kRead)
        return r;
    }
  }
  return Reading::kRead;
}

// The footprint of `graph`: which of its allocations a launch leaves
// allocated, and which of its frees are of other graphs' allocations.
Reading read_footprint(Tenant* tenant, CUgraph graph, Footprint& footprint) {
  try {
    std::vector<graph_books::Allocation> all;
    std::vector<CUdeviceptr> frees;
    if (Reading r = add_graph_memory(tenant, graph, 0, footprint, all, frees); r != Reading::kRead)
      return r;
    std::sort(frees.begin(), frees.end());
    for (const graph_books::Allocation& a : all)
      if (!std::binary_search(frees.begin(), frees.end(), a.ptr)) footprint.unfreed.push_back(a);
    std::vector<CUdeviceptr> own;
    for (const graph_books::Allocation& a : all)
      own.push_back(a.ptr);
    std::sort(own.begin(), own.end());
    for (CUdeviceptr ptr : frees)
      if (!std::binary_search(own.begin(), own.end(), ptr)) footprint.frees.push_back(ptr);
  } catch (...) {
    return Reading::kUncounted;  // out of host memory
  }
  return Reading::kRead;
}

// Instantiates `graph` into `*exec` with `instantiate()`, charging its graph
// memory first. `refused()` records a refusal where the variant reports one.
template <typename Instantiate, typename Refused>
CUresult instantiate_charged(CUgraphExec* exec, CUgraph graph, Instantiate&& instantiate,
                             Refused&& refused) {
  Tenant* tenant = Tenant::limited();
  if (!tenant && Tenant::refused()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!tenant || !exec) return instantiate();
  Footprint footprint;
  switch (read_footprint(tenant, graph, footprint)) {
    case Reading::kRead:
      break;
    case Reading::kUnreadable:
      return instantiate();  // the driver reports what is wrong with the graph
    case Reading::kUncounted:
      refused();
      return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (footprint.empty()) return instantiate();
  if (!graph_books::charge(tenant, footprint)) {
    refused();
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUgraphExec previous = *exec;
  const CUresult result = instantiate();
  if (result != CUDA_SUCCESS) {
    graph_books::uncharge(tenant, footprint);
    return result;
  }
  if (!graph_books::record(*exec, footprint)) {
    // Out of host memory for the books: undo rather than let it escape the cap.
    if (auto destroy = real_function(real::cuGraphExecDestroy)) destroy(*exec);
    *exec = previous;
    graph_books::uncharge(tenant, footprint);
    refused();
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

void nothing_to_report() {}

// The variants that take parameters say in them why instantiation failed.
template <typename Real>
CUresult instantiate_with_params(Real real, CUgraphExec* exec, CUgraph graph,
                                 CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  if (!real) return CUDA_ERROR_NOT_FOUND;
  if (!params) return real(exec, graph, params);  // the driver's own error
  return instantiate_charged(
      exec, graph, [&] { return real(exec, graph, params); },
      [&] {
        params->hErrNode_out = nullptr;
        params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
      });
}

}  // namespace

GPULIMIT_EXPORT CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph,
                                            CUgraphNode* error_node, char* log, size_t log_size) {
  auto real = real_function(real::cuGraphInstantiate);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return instantiate_charged(
      exec, graph, [&] { return real(exec, graph, error_node, log, log_size); }, nothing_to_report);
}

GPULIMIT_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph,
                                               CUgraphNode* error_node, char* log,
                                               size_t log_size) {
  auto real = real_function(real::cuGraphInstantiate_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return instantiate_charged(
      exec, graph, [&] { return real(exec, graph, error_node, log, log_size); }, nothing_to_report);
}

GPULIMIT_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                                     unsigned long long flags) {
  auto real = real_function(real::cuGraphInstantiateWithFlags);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return instantiate_charged(
      exec, graph, [&] { return real(exec, graph, flags); }, nothing_to_report);
}

GPULIMIT_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return instantiate_with_params(real_function(real::cuGraphInstantiateWithParams), exec, graph,
                                 params);
}

GPULIMIT_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return instantiate_with_params(real_function(real::cuGraphInstantiateWithParams_ptsz), exec,
                                 graph, params);
}

GPULIMIT_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  auto real = real_function(real::cuGraphExecDestroy);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  Tenant* tenant = Tenant::limited();
  if (!tenant) return real(exec);
  return graph_books::destroy(tenant, exec, [&] { return real(exec); });
}

GPULIMIT_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device) {
  auto real = real_function(real::cuDeviceGraphMemTrim);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  const CUresult result = real(device);
  if (Tenant* tenant = Tenant::limited(); tenant && result == CUDA_SUCCESS)
    graph_books::trimmed(tenant, device);
  return result;
}
