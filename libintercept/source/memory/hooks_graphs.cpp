// Graph memory: what a graph's memory-allocation nodes take, whether added
// with cuGraphAddMemAllocNode (or cuGraphAddNode) or made by cuMemAllocAsync
// on a capturing stream. The driver backs them from its per-device graph
// memory pool when the graph is launched; gpulimit charges them earlier, when
// the graph is instantiated, so that a graph over the cap is refused before
// it can run: the sizes of its allocation nodes (those of child graphs it
// owns included), summed per device (the node's own location), are reserved
// against the cap before the real instantiation, given back if it fails, and
// given back when the executable graph is destroyed. Over the cap the
// instantiation returns CUDA_ERROR_OUT_OF_MEMORY and nothing is created.
//
// The charge is an upper bound for as long as the executable graph exists:
// the driver may reuse one node's memory for another's and share its pool
// between graphs, and a graph may free what it allocates before it ends.
// It does not cover what outlives the executable graph: the pool keeps its
// memory until cuDeviceGraphMemTrim, and an allocation the graph does not
// free lasts until it is freed. docs/memory-accounting.md has the whole list.
#include <algorithm>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>

#include "gpulimit/shm/tenant_ledger.h"
#include "memory/accounting.h"

using namespace gpulimit;

namespace {

// Bytes per ledger device.
struct GraphMemory {
  uint64_t bytes[shm::kMaxDevices] = {};

  bool empty() const {
    for (uint64_t b : bytes)
      if (b) return false;
    return true;
  }
};

enum class Reading {
  kRead,
  kUnreadable,  // the driver would not describe the graph: it reports that itself
  kUncounted,   // no room to list the nodes, or nested too deep: refused, not let through
};

// Child graphs nest; a graph nested deeper than this is refused.
constexpr int kMaxDepth = 64;

// Adds the allocation nodes of `graph`, and of the child graphs it owns, to
// `memory`. Child graphs may hold allocation nodes when the parent owns them
// (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE); conditional bodies may not.
Reading add_graph_memory(Tenant* tenant, CUgraph graph, int depth, GraphMemory& memory) {
  auto get_nodes = real_function(real::cuGraphGetNodes);
  auto get_type = real_function(real::cuGraphNodeGetType);
  auto get_alloc = real_function(real::cuGraphMemAllocNodeGetParams);
  auto get_child = real_function(real::cuGraphChildGraphNodeGetGraph);
  // A driver before 11.4 has no allocation nodes to count.
  if (!get_nodes || !get_type || !get_alloc) return Reading::kUnreadable;
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
      const int device = tenant->ledger_device(params.poolProps.location.id);
      if (device >= 0) memory.bytes[device] += params.bytesize;
    } else if (type == CU_GRAPH_NODE_TYPE_GRAPH && get_child) {
      CUgraph child = nullptr;
      if (get_child(nodes[i], &child) != CUDA_SUCCESS) return Reading::kUnreadable;
      if (Reading r = add_graph_memory(tenant, child, depth + 1, memory); r != Reading::kRead)
        return r;
    }
  }
  return Reading::kRead;
}

bool reserve_all(Tenant* tenant, const GraphMemory& memory) {
  for (int d = 0; d < static_cast<int>(shm::kMaxDevices); ++d) {
    if (!memory.bytes[d] || tenant->reserve(d, memory.bytes[d])) continue;
    for (int back = 0; back < d; ++back)
      if (memory.bytes[back]) tenant->release(back, memory.bytes[back]);
    return false;
  }
  return true;
}

void release_all(Tenant* tenant, const GraphMemory& memory) {
  for (int d = 0; d < static_cast<int>(shm::kMaxDevices); ++d)
    if (memory.bytes[d]) tenant->release(d, memory.bytes[d]);
}

// What each executable graph was charged. Instantiation is rare and slow
// next to a launch: one lock is enough.
std::mutex charges_mu;
std::unordered_map<CUgraphExec, GraphMemory>& charges() {
  static auto* map = new std::unordered_map<CUgraphExec, GraphMemory>();  // never destroyed
  return *map;
}

bool remember(CUgraphExec exec, const GraphMemory& memory) {
  std::lock_guard<std::mutex> guard(charges_mu);
  try {
    charges()[exec] = memory;
  } catch (...) {
    return false;  // out of host memory: the caller undoes the instantiation
  }
  return true;
}

bool forget(CUgraphExec exec, GraphMemory* memory) {
  std::lock_guard<std::mutex> guard(charges_mu);
  auto it = charges().find(exec);
  if (it == charges().end()) return false;
  *memory = it->second;
  charges().erase(it);
  return true;
}

// Instantiates `graph` into `*exec` with `instantiate()`, charging its graph
// memory first. `refused()` records a refusal where the variant reports one.
template <typename Instantiate, typename Refused>
CUresult instantiate_charged(CUgraphExec* exec, CUgraph graph, Instantiate&& instantiate,
                             Refused&& refused) {
  Tenant* tenant = Tenant::limited();
  if (!tenant && Tenant::refused()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!tenant || !exec) return instantiate();
  GraphMemory memory;
  switch (add_graph_memory(tenant, graph, 0, memory)) {
    case Reading::kRead:
      break;
    case Reading::kUnreadable:
      return instantiate();  // the driver reports what is wrong with the graph
    case Reading::kUncounted:
      refused();
      return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (memory.empty()) return instantiate();
  if (!reserve_all(tenant, memory)) {
    refused();
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUgraphExec previous = *exec;
  const CUresult result = instantiate();
  if (result != CUDA_SUCCESS) {
    release_all(tenant, memory);
    return result;
  }
  if (!remember(*exec, memory)) {
    // Out of host memory for the books: undo rather than let it escape the cap.
    if (auto destroy = real_function(real::cuGraphExecDestroy)) destroy(*exec);
    *exec = previous;
    release_all(tenant, memory);
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
  GraphMemory memory;
  if (!tenant || !forget(exec, &memory)) return real(exec);
  const CUresult result = real(exec);
  if (result == CUDA_SUCCESS)
    release_all(tenant, memory);
  else
    remember(exec, memory);  // still instantiated
  return result;
}
