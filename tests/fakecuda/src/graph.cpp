// CUDA graphs, built explicitly or by stream capture, and graph memory.
// Launching an executable graph enqueues its nodes' ops in a topological
// order on the stream: each kernel still occupies the device on its own.
#include "graph.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>

#include "context.h"
#include "launch.h"
#include "memory.h"
#include "stream.h"

using namespace fakecuda;

struct CUgraphNode_st {
  uint32_t magic;
  CUgraph_st* graph;
  CUgraphNodeType type;
  std::vector<CUgraphNode_st*> deps;
  fakecuda::Op op;  // kernel, host and copy nodes
  // In an executable graph's copy: the node of the graph it was made from.
  const CUgraphNode_st* origin = nullptr;
  // Memory nodes
  CUdeviceptr dptr;
  size_t bytes;
  int ordinal;
  uint32_t physical;
  // Child graph nodes: the graph the node owns.
  CUgraph_st* child;
};

struct CUgraph_st {
  uint32_t magic;
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
  bool owned = false;  // by a child graph node: destroyed with its parent only
};

struct CUgraphExec_st {
  uint32_t magic;
  std::vector<CUgraphNode_st> order;  // copies, in a topological order
  uint64_t alloc_bytes[kMaxDevices];  // graph memory one launch allocates, per ordinal
  bool auto_free = false;             // CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH
  // Alloc nodes without a free node in the graph: what a launch leaves
  // allocated, until cuMemFree[Async] or another graph frees it.
  std::vector<const CUgraphNode_st*> unfreed;
  // Of those, the addresses a launch has queued whose alloc node has not run
  // yet (shared with the queued ops, which may outlive the executable graph).
  std::shared_ptr<std::set<CUdeviceptr>> pending = std::make_shared<std::set<CUdeviceptr>>();
};

namespace {

// Per ordinal: graph memory of this process (the real driver keeps one
// graph memory pool per device).
struct GraphPool {
  uint64_t reserved = 0;   // charged to the device
  uint64_t used = 0;       // allocated by executed alloc nodes and not yet freed
  uint64_t committed = 0;  // promised to launched graphs whose alloc nodes have not run
  uint64_t releasing = 0;  // freed by auto-free on launch, queued: there to be used again
  uint64_t reserved_high = 0;
  uint64_t used_high = 0;
};

std::vector<GraphPool>& graph_pools() {
  static auto* pools = new std::vector<GraphPool>(kMaxDevices);
  return *pools;
}

// Address of every alloc node → its size, so that frees find their node.
std::map<CUdeviceptr, size_t>& graph_addresses() {
  static auto* addresses = new std::map<CUdeviceptr, size_t>();
  return *addresses;
}

std::vector<Capture*>& active_captures() {
  static auto* captures = new std::vector<Capture*>();
  return *captures;
}

CUstreamCaptureMode& thread_capture_mode() {
  thread_local CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  return mode;
}

uint64_t next_capture_id = 1;

CUgraph_st* new_graph() {
  auto* g = new CUgraph_st{kGraphMagic, {}, false};
  Driver::get().live.insert(g);
  return g;
}

CUgraphNode_st* add_node(CUgraph_st* graph, CUgraphNodeType type,
                         std::vector<CUgraphNode_st*> deps) {
  auto node = std::make_unique<CUgraphNode_st>();
  node->magic = kGraphNodeMagic;
  node->graph = graph;
  node->type = type;
  node->deps = std::move(deps);
  CUgraphNode_st* raw = node.get();
  graph->nodes.push_back(std::move(node));
  Driver::get().live.insert(raw);
  return raw;
}

CUresult checked_deps(CUgraph_st* graph, const CUgraphNode* deps, size_t count,
                      std::vector<CUgraphNode_st*>* out) {
  FAKECUDA_REQUIRE(count == 0 || deps, CUDA_ERROR_INVALID_VALUE);
  for (size_t i = 0; i < count; ++i) {
    FAKECUDA_REQUIRE(Driver::get().is_live(deps[i], kGraphNodeMagic) && deps[i]->graph == graph,
                     CUDA_ERROR_INVALID_VALUE);
    out->push_back(deps[i]);
  }
  return CUDA_SUCCESS;
}

void destroy_graph_locked(CUgraph_st* graph) {
  Driver& d = Driver::get();
  for (auto& node : graph->nodes) {
    if (node->child) destroy_graph_locked(node->child);
    d.live.erase(node.get());
  }
  d.live.erase(graph);
  delete graph;
}

bool has_memory_nodes(const CUgraph_st* graph) {
  for (const auto& node : graph->nodes)
    if (node->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || node->type == CU_GRAPH_NODE_TYPE_MEM_FREE ||
        (node->child && has_memory_nodes(node->child)))
      return true;
  return false;
}

// Whether `inner` is `graph` or one of the graphs it owns, at any depth.
bool contains_graph(const CUgraph_st* graph, const CUgraph_st* inner) {
  if (graph == inner) return true;
  for (const auto& node : graph->nodes)
    if (node->child && contains_graph(node->child, inner)) return true;
  return false;
}

// A copy of `graph` with nodes of its own (child graphs copied too).
CUgraph_st* clone_graph_locked(const CUgraph_st* graph) {
  CUgraph_st* copy = new_graph();
  std::map<const CUgraphNode_st*, CUgraphNode_st*> copies;
  for (const auto& node : graph->nodes) {
    std::vector<CUgraphNode_st*> deps;
    for (const CUgraphNode_st* dep : node->deps)
      deps.push_back(copies.at(dep));
    CUgraphNode_st* raw = add_node(copy, node->type, std::move(deps));
    raw->op = node->op;
    raw->dptr = node->dptr;
    raw->bytes = node->bytes;
    raw->ordinal = node->ordinal;
    raw->physical = node->physical;
    if (node->child) {
      raw->child = clone_graph_locked(node->child);
      raw->child->owned = true;
    }
    copies[node.get()] = raw;
  }
  return copy;
}

// Ends `capture` for all its streams and forgets it.
void end_capture_locked(Capture* capture) {
  for (CUstream_st* s : capture->streams) {
    if (s->capture != capture) continue;
    s->capture = nullptr;
    s->capture_tail.clear();
  }
  auto& active = active_captures();
  active.erase(std::remove(active.begin(), active.end(), capture), active.end());
  delete capture;
}

bool prohibits_unsafe_calls(const Capture* capture) {
  if (capture->invalidated) return false;
  const CUstreamCaptureMode thread_mode = thread_capture_mode();
  if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return false;
  if (capture->thread == std::this_thread::get_id())
    return capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
  return thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
         capture->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

CUresult begin_capture(CUstream handle, CUstreamCaptureMode mode, DefaultStream stream_mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
                       mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ||
                       mode == CU_STREAM_CAPTURE_MODE_RELAXED,
                   CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(handle, stream_mode, &s); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(s->kind != CUstream_st::Kind::kLegacy, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  FAKECUDA_REQUIRE(!s->capture, CUDA_ERROR_ILLEGAL_STATE);
  auto* capture =
      new Capture{new_graph(), mode, s, std::this_thread::get_id(), next_capture_id++, false, {s}};
  s->capture = capture;
  s->capture_tail.clear();
  active_captures().push_back(capture);
  return CUDA_SUCCESS;
}

// Nodes reachable backwards from `from`, `from` included.
std::set<const CUgraphNode_st*> ancestors(const std::vector<CUgraphNode_st*>& from) {
  std::set<const CUgraphNode_st*> seen;
  std::vector<const CUgraphNode_st*> todo(from.begin(), from.end());
  while (!todo.empty()) {
    const CUgraphNode_st* n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    for (const CUgraphNode_st* dep : n->deps)
      todo.push_back(dep);
  }
  return seen;
}

CUresult end_capture(CUstream handle, CUgraph* out, DefaultStream stream_mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(handle, stream_mode, &s); r != CUDA_SUCCESS) return r;
  Capture* capture = s->capture;
  FAKECUDA_REQUIRE(capture, CUDA_ERROR_ILLEGAL_STATE);
  FAKECUDA_REQUIRE(capture->origin == s, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
  if (capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
      capture->thread != std::this_thread::get_id())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  *out = nullptr;
  CUgraph_st* graph = capture->graph;
  CUresult result = CUDA_SUCCESS;
  if (capture->invalidated) {
    result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  } else {
    // Every stream that forked from the origin must have joined back.
    const auto joined = ancestors(s->capture_tail);
    for (CUstream_st* other : capture->streams) {
      if (other == s || other->capture != capture) continue;
      for (const CUgraphNode_st* tail : other->capture_tail)
        if (!joined.count(tail)) result = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    }
  }
  end_capture_locked(capture);
  if (result != CUDA_SUCCESS) {
    destroy_graph_locked(graph);
    return result;
  }
  *out = graph;
  return CUDA_SUCCESS;
}

CUresult capture_status(CUstream handle, DefaultStream mode, CUstreamCaptureStatus* status,
                        CUstream_st** out) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(status, CUDA_ERROR_INVALID_VALUE);
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(handle, mode, &s); r != CUDA_SUCCESS) return r;
  if (s->kind == CUstream_st::Kind::kLegacy)
    if (CUresult r = check_legacy_use_locked(s); r != CUDA_SUCCESS) return r;
  *status = !s->capture               ? CU_STREAM_CAPTURE_STATUS_NONE
            : s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                      : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  *out = s;
  return CUDA_SUCCESS;
}

CUresult is_capturing(CUstream handle, CUstreamCaptureStatus* status, DefaultStream mode) {
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUstream_st* s = nullptr;
  return capture_status(handle, mode, status, &s);
}

CUresult capture_info(CUstream handle, CUstreamCaptureStatus* status, cuuint64_t* id,
                      CUgraph* graph, const CUgraphNode** deps, const CUgraphEdgeData** edges,
                      size_t* count, DefaultStream mode) {
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUstream_st* s = nullptr;
  if (CUresult r = capture_status(handle, mode, status, &s); r != CUDA_SUCCESS) return r;
  const bool active = *status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (id && active) *id = s->capture->id;
  if (graph) *graph = active ? s->capture->graph : nullptr;
  if (deps) *deps = active ? s->capture_tail.data() : nullptr;
  if (edges) *edges = nullptr;
  if (count) *count = active ? s->capture_tail.size() : 0;
  return CUDA_SUCCESS;
}

// Appends the nodes of `graph` to `exec` in a topological order (Kahn's
// algorithm, stable in creation order); a child graph node stands for its
// graph's nodes, in their own order.
CUresult append_in_order(const CUgraph_st* graph, CUgraphExec_st* exec) {
  std::set<const CUgraphNode_st*> done;
  while (done.size() < graph->nodes.size()) {
    bool progress = false;
    for (auto& node : graph->nodes) {
      if (done.count(node.get())) continue;
      bool ready = std::all_of(node->deps.begin(), node->deps.end(),
                               [&](const CUgraphNode_st* dep) { return done.count(dep) > 0; });
      if (!ready) continue;
      if (node->child) {
        if (CUresult r = append_in_order(node->child, exec); r != CUDA_SUCCESS) return r;
      } else {
        exec->order.push_back(*node);
        exec->order.back().origin = node.get();
      }
      if (node->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        exec->alloc_bytes[node->ordinal] += node->bytes;
      done.insert(node.get());
      progress = true;
    }
    FAKECUDA_REQUIRE(progress, CUDA_ERROR_INVALID_VALUE);
  }
  return CUDA_SUCCESS;
}

// The instantiation flags CUDA 13 defines; any other bit is refused.
constexpr unsigned long long kInstantiateFlags =
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
    CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;

CUresult instantiate(CUgraphExec* out, CUgraph graph, unsigned long long flags = 0) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE((flags & ~kInstantiateFlags) == 0, CUDA_ERROR_INVALID_VALUE);
  // Auto-free and device launch exclude each other, as documented.
  FAKECUDA_REQUIRE(!(flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) ||
                       !(flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH),
                   CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(graph, kGraphMagic), CUDA_ERROR_INVALID_VALUE);
  auto exec = std::make_unique<CUgraphExec_st>();
  exec->magic = kGraphExecMagic;
  std::fill(std::begin(exec->alloc_bytes), std::end(exec->alloc_bytes), 0);
  if (CUresult r = append_in_order(graph, exec.get()); r != CUDA_SUCCESS) return r;
  exec->auto_free = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0;
  for (const CUgraphNode_st& node : exec->order) {
    if (node.type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) continue;
    const bool freed_here =
        std::any_of(exec->order.begin(), exec->order.end(), [&](const CUgraphNode_st& other) {
          return other.type == CU_GRAPH_NODE_TYPE_MEM_FREE && other.dptr == node.dptr;
        });
    if (!freed_here) exec->unfreed.push_back(&node);
  }
  d.live.insert(exec.get());
  *out = exec.release();
  return CUDA_SUCCESS;
}

Op node_op(const CUgraphNode_st& node, const std::shared_ptr<std::set<CUdeviceptr>>& pending) {
  if (node.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    Allocation a;
    a.base = node.dptr;
    a.size = node.bytes;
    a.physical = node.physical;
    a.ordinal = node.ordinal;
    a.kind = AllocationKind::kGraph;
    return action_op([a, pending](uint64_t) {
      GraphPool& pool = graph_pools()[static_cast<size_t>(a.ordinal)];
      pool.committed -= a.size;
      pool.used += a.size;
      pool.used_high = std::max(pool.used_high, pool.used);
      Driver::get().allocations[a.base] = a;
      pending->erase(a.base);
    });
  }
  if (node.type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
    const CUdeviceptr dptr = node.dptr;
    return action_op([dptr](uint64_t) {
      Driver& d = Driver::get();
      auto it = d.allocations.find(dptr);
      if (it != d.allocations.end() && it->second.kind == AllocationKind::kGraph)
        release_allocation_locked(it->second);
    });
  }
  return node.op;
}

CUresult launch(CUgraphExec exec, CUstream handle, DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(exec, kGraphExecMagic), CUDA_ERROR_INVALID_VALUE);
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(handle, mode, &s); r != CUDA_SUCCESS) return r;
  if (s->capture) {
    // Launching a graph inside a capture inlines its nodes.
    for (const CUgraphNode_st& node : exec->order) {
      if (node.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || node.type == CU_GRAPH_NODE_TYPE_MEM_FREE)
        return CUDA_ERROR_NOT_SUPPORTED;
      if (node.type == CU_GRAPH_NODE_TYPE_EMPTY) continue;
      if (CUresult r = capture_op_locked(s, node.op); r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
  }
  // What an earlier launch left allocated must have been freed, unless the
  // graph frees it itself before it runs again (as cuGraphLaunch documents:
  // otherwise the launch fails with CUDA_ERROR_INVALID_VALUE).
  std::vector<Allocation> auto_freed;
  std::vector<CUdeviceptr> auto_freed_queued;
  uint64_t auto_freed_bytes[kMaxDevices] = {};
  for (const CUgraphNode_st* node : exec->unfreed) {
    auto live = d.allocations.find(node->dptr);
    const bool allocated =
        live != d.allocations.end() && live->second.kind == AllocationKind::kGraph;
    FAKECUDA_REQUIRE(exec->auto_free || (!allocated && !exec->pending->count(node->dptr)),
                     CUDA_ERROR_INVALID_VALUE);
    if (allocated) {
      auto_freed.push_back(live->second);
    } else if (exec->pending->count(node->dptr)) {
      auto_freed_queued.push_back(node->dptr);  // allocated by the time the stream gets there
    } else {
      continue;
    }
    auto_freed_bytes[node->ordinal] += node->bytes;
  }
  // Graph memory is backed when the graph is launched, from the device's
  // graph pool, which grows by charging the device; what the launch frees
  // first is there to be used again.
  for (int ordinal = 0; ordinal < d.device_count(); ++ordinal) {
    const uint64_t need = exec->alloc_bytes[ordinal];
    if (!need) continue;
    GraphPool& pool = graph_pools()[static_cast<size_t>(ordinal)];
    const uint64_t wanted =
        pool.used + pool.committed + need - pool.releasing - auto_freed_bytes[ordinal];
    if (wanted > pool.reserved) {
      const uint64_t grow = round_up(wanted - pool.reserved, kPageSize);
      if (!d.shared().charge(d.device(ordinal).physical, grow)) return CUDA_ERROR_OUT_OF_MEMORY;
      pool.reserved += grow;
      pool.reserved_high = std::max(pool.reserved_high, pool.reserved);
    }
    pool.committed += need;
  }
  for (int ordinal = 0; ordinal < d.device_count(); ++ordinal)
    graph_pools()[static_cast<size_t>(ordinal)].releasing += auto_freed_bytes[ordinal];
  // Freed as though by cuMemFreeAsync on the stream, ahead of the graph:
  // dead to new calls at once, back in the pool when the stream gets there.
  for (const Allocation& a : auto_freed) {
    d.allocations.erase(a.base);
    Op free_op = action_op([a](uint64_t) {
      graph_pools()[static_cast<size_t>(a.ordinal)].releasing -= a.size;
      Driver::get().allocations[a.base] = a;  // release_allocation_locked expects it registered
      release_allocation_locked(a);
    });
    if (CUresult r = submit_locked(s, mode, std::move(free_op)); r != CUDA_SUCCESS) return r;
  }
  for (const CUgraphNode_st* node : exec->unfreed) {
    if (std::find(auto_freed_queued.begin(), auto_freed_queued.end(), node->dptr) ==
        auto_freed_queued.end())
      continue;
    const CUdeviceptr dptr = node->dptr;
    const size_t bytes = node->bytes;
    const size_t ordinal = static_cast<size_t>(node->ordinal);
    Op free_op = action_op([dptr, bytes, ordinal](uint64_t) {
      graph_pools()[ordinal].releasing -= bytes;
      Driver& driver = Driver::get();
      auto it = driver.allocations.find(dptr);
      if (it != driver.allocations.end() && it->second.kind == AllocationKind::kGraph)
        release_allocation_locked(it->second);
    });
    if (CUresult r = submit_locked(s, mode, std::move(free_op)); r != CUDA_SUCCESS) return r;
  }
  for (const CUgraphNode_st* node : exec->unfreed)
    exec->pending->insert(node->dptr);
  for (const CUgraphNode_st& node : exec->order) {
    if (node.type == CU_GRAPH_NODE_TYPE_EMPTY) continue;
    if (CUresult r = submit_locked(s, mode, node_op(node, exec->pending)); r != CUDA_SUCCESS)
      return r;
  }
  return CUDA_SUCCESS;
}

CUresult add_mem_alloc_node(std::vector<CUgraphNode_st*> deps, CUgraph_st* graph, size_t bytes,
                            int ordinal, CUgraphNode_st** node_out, CUdeviceptr* dptr) {
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(bytes > 0 && d.valid_device(ordinal), CUDA_ERROR_INVALID_VALUE);
  // The address is fixed when the node is made; memory backs it per launch.
  const size_t span = round_up(bytes, 4096);
  void* va = map_device_memory(span);
  FAKECUDA_REQUIRE(va, CUDA_ERROR_OUT_OF_MEMORY);
  CUgraphNode_st* node = add_node(graph, CU_GRAPH_NODE_TYPE_MEM_ALLOC, std::move(deps));
  node->dptr = reinterpret_cast<CUdeviceptr>(va);
  node->bytes = bytes;
  node->ordinal = ordinal;
  node->physical = d.device(ordinal).physical;
  graph_addresses()[node->dptr] = bytes;
  *node_out = node;
  *dptr = node->dptr;
  return CUDA_SUCCESS;
}

}  // namespace

namespace fakecuda {

CUresult capture_op_locked(CUstream_st* stream, Op op) {
  Capture* capture = stream->capture;
  if (capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  const CUgraphNodeType type = op.kind == Op::Kind::kKernel ? CU_GRAPH_NODE_TYPE_KERNEL
                               : op.run_unlocked            ? CU_GRAPH_NODE_TYPE_HOST
                                                            : CU_GRAPH_NODE_TYPE_MEMCPY;
  CUgraphNode_st* node = add_node(capture->graph, type, stream->capture_tail);
  node->op = std::move(op);
  stream->capture_tail = {node};
  return CUDA_SUCCESS;
}

CUresult check_legacy_use_locked(CUstream_st* legacy) {
  bool implicit = false;
  for (CUstream_st* s : legacy->ctx->streams) {
    if (s->capture && s->blocking() && s != legacy) {
      s->capture->invalidated = true;
      implicit = true;
    }
  }
  return implicit ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

CUresult capture_forbids_unsafe_call_locked() {
  bool forbidden = false;
  for (Capture* capture : active_captures()) {
    if (prohibits_unsafe_calls(capture)) {
      capture->invalidated = true;
      forbidden = true;
    }
  }
  return forbidden ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

void invalidate_capture_locked(CUstream_st* stream) {
  if (stream->capture) stream->capture->invalidated = true;
}

CUresult capture_mem_alloc_locked(CUstream_st* stream, size_t bytes, CUdeviceptr* out) {
  Capture* capture = stream->capture;
  if (capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  CUgraphNode_st* node = nullptr;
  if (CUresult r = add_mem_alloc_node(stream->capture_tail, capture->graph, bytes,
                                      stream->ctx->ordinal, &node, out);
      r != CUDA_SUCCESS)
    return r;
  stream->capture_tail = {node};
  return CUDA_SUCCESS;
}

CUresult capture_mem_free_locked(CUstream_st* stream, CUdeviceptr ptr) {
  Capture* capture = stream->capture;
  if (capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  FAKECUDA_REQUIRE(graph_addresses().count(ptr), CUDA_ERROR_INVALID_VALUE);
  CUgraphNode_st* node =
      add_node(capture->graph, CU_GRAPH_NODE_TYPE_MEM_FREE, stream->capture_tail);
  node->dptr = ptr;
  stream->capture_tail = {node};
  return CUDA_SUCCESS;
}

bool graph_address_locked(CUdeviceptr ptr) {
  return graph_addresses().count(ptr) != 0;
}

void return_to_graph_pool_locked(const Allocation& a) {
  GraphPool& pool = graph_pools()[static_cast<size_t>(a.ordinal)];
  pool.used -= a.size;
}

}  // namespace fakecuda

// ---- Capture ------------------------------------------------------------------------

FAKECUDA_EXPORT CUresult cuStreamBeginCapture(CUstream s) {
  return begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s) {
  return begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  return begin_capture(s, mode, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  return begin_capture(s, mode, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
  return end_capture(s, g, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) {
  return end_capture(s, g, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  return is_capturing(s, status, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus* status) {
  return is_capturing(s, status, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus* status,
                                                cuuint64_t* id) {
  return capture_info(s, status, id, nullptr, nullptr, nullptr, nullptr, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamGetCaptureInfo_ptsz(CUstream s, CUstreamCaptureStatus* status,
                                                     cuuint64_t* id) {
  return capture_info(s, status, id, nullptr, nullptr, nullptr, nullptr, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus* status,
                                                   cuuint64_t* id, CUgraph* graph,
                                                   const CUgraphNode** deps, size_t* count) {
  return capture_info(s, status, id, graph, deps, nullptr, count, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream s, CUstreamCaptureStatus* status,
                                                        cuuint64_t* id, CUgraph* graph,
                                                        const CUgraphNode** deps, size_t* count) {
  return capture_info(s, status, id, graph, deps, nullptr, count, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus* status,
                                                   cuuint64_t* id, CUgraph* graph,
                                                   const CUgraphNode** deps,
                                                   const CUgraphEdgeData** edges, size_t* count) {
  return capture_info(s, status, id, graph, deps, edges, count, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream s, CUstreamCaptureStatus* status,
                                                        cuuint64_t* id, CUgraph* graph,
                                                        const CUgraphNode** deps,
                                                        const CUgraphEdgeData** edges,
                                                        size_t* count) {
  return capture_info(s, status, id, graph, deps, edges, count, DefaultStream::kPerThread);
}

FAKECUDA_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(mode, CUDA_ERROR_INVALID_VALUE);
  std::swap(*mode, thread_capture_mode());
  return CUDA_SUCCESS;
}

// ---- Graphs ----------------------------------------------------------------------------

FAKECUDA_EXPORT CUresult cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(phGraph && flags == 0, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  *phGraph = new_graph();
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuGraphDestroy(CUgraph hGraph) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hGraph, kGraphMagic) && !hGraph->owned, CUDA_ERROR_INVALID_VALUE);
  destroy_graph_locked(hGraph);
  return CUDA_SUCCESS;
}

static CUresult add_kernel_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                                size_t count, CUfunction func, CUctx_st* ctx,
                                const LaunchShape& shape, void** params, void** extra) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(graph, kGraphMagic), CUDA_ERROR_INVALID_VALUE);
  std::vector<CUgraphNode_st*> dependencies;
  if (CUresult r = checked_deps(graph, deps, count, &dependencies); r != CUDA_SUCCESS) return r;
  Op op;
  if (CUresult r = kernel_op_locked(func, shape, params, extra, &op, ctx); r != CUDA_SUCCESS)
    return r;
  CUgraphNode_st* node = add_node(graph, CU_GRAPH_NODE_TYPE_KERNEL, std::move(dependencies));
  node->op = std::move(op);
  *out = node;
  return CUDA_SUCCESS;
}

// The launch a kernel node's parameters describe. v2 adds a CUkernel and the
// context to take its function from, used when `func` is NULL.
static LaunchShape node_shape(const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return LaunchShape{{p->gridDimX, p->gridDimY, p->gridDimZ},
                     {p->blockDimX, p->blockDimY, p->blockDimZ},
                     p->sharedMemBytes,
                     false};
}
static LaunchShape node_shape(const CUDA_KERNEL_NODE_PARAMS* p) {
  return LaunchShape{{p->gridDimX, p->gridDimY, p->gridDimZ},
                     {p->blockDimX, p->blockDimY, p->blockDimZ},
                     p->sharedMemBytes,
                     false};
}
static CUfunction node_function(const CUDA_KERNEL_NODE_PARAMS_v1* p, CUctx_st** ctx) {
  *ctx = nullptr;
  return p->func;
}
static CUfunction node_function(const CUDA_KERNEL_NODE_PARAMS* p, CUctx_st** ctx) {
  *ctx = p->func ? nullptr : p->ctx;
  return p->func ? p->func : reinterpret_cast<CUfunction>(p->kern);
}

template <typename Params>
static CUresult add_kernel_node_with(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                                     size_t count, const Params* p) {
  FAKECUDA_REQUIRE(p, CUDA_ERROR_INVALID_VALUE);
  CUctx_st* ctx = nullptr;
  CUfunction func = node_function(p, &ctx);
  return add_kernel_node(out, graph, deps, count, func, ctx, node_shape(p), p->kernelParams,
                         p->extra);
}

FAKECUDA_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode* out, CUgraph graph,
                                              const CUgraphNode* deps, size_t count,
                                              const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return add_kernel_node_with(out, graph, deps, count, p);
}

FAKECUDA_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode* out, CUgraph graph,
                                                 const CUgraphNode* deps, size_t count,
                                                 const CUDA_KERNEL_NODE_PARAMS* p) {
  return add_kernel_node_with(out, graph, deps, count, p);
}

// Replaces a kernel node's launch; the node keeps its place and edges.
template <typename Params>
static CUresult set_kernel_node_params(CUgraphNode node, const Params* p) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(p, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(node, kGraphNodeMagic), CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(node->type == CU_GRAPH_NODE_TYPE_KERNEL, CUDA_ERROR_INVALID_VALUE);
  CUctx_st* ctx = nullptr;
  CUfunction func = node_function(p, &ctx);
  Op op;
  if (CUresult r = kernel_op_locked(func, node_shape(p), p->kernelParams, p->extra, &op, ctx);
      r != CUDA_SUCCESS)
    return r;
  node->op = std::move(op);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuGraphKernelNodeSetParams(CUgraphNode node,
                                                    const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return set_kernel_node_params(node, p);
}

FAKECUDA_EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode node,
                                                       const CUDA_KERNEL_NODE_PARAMS* p) {
  return set_kernel_node_params(node, p);
}

// A kernel node's launch as the v1 and v2 parameter structures describe it;
// kernelParams point into the node's own copy of the arguments.
static void describe_launch(const KernelLaunch& k, CUDA_KERNEL_NODE_PARAMS_v1* p) {
  *p = CUDA_KERNEL_NODE_PARAMS_v1{};
  p->func = k.func;
  p->gridDimX = k.shape.grid[0];
  p->gridDimY = k.shape.grid[1];
  p->gridDimZ = k.shape.grid[2];
  p->blockDimX = k.shape.block[0];
  p->blockDimY = k.shape.block[1];
  p->blockDimZ = k.shape.block[2];
  p->sharedMemBytes = k.shape.shared_mem;
  p->kernelParams = const_cast<void**>(k.arg_pointers.data());
}
static void describe_launch(const KernelLaunch& k, CUDA_KERNEL_NODE_PARAMS* p) {
  CUDA_KERNEL_NODE_PARAMS_v1 v1;
  describe_launch(k, &v1);
  *p = CUDA_KERNEL_NODE_PARAMS{};
  const bool kernel = Driver::get().is_live(k.func, kKernelMagic);
  p->func = kernel ? nullptr : v1.func;
  p->kern = kernel ? reinterpret_cast<CUkernel>(k.func) : nullptr;
  p->ctx = kernel ? k.ctx : nullptr;
  p->gridDimX = v1.gridDimX;
  p->gridDimY = v1.gridDimY;
  p->gridDimZ = v1.gridDimZ;
  p->blockDimX = v1.blockDimX;
  p->blockDimY = v1.blockDimY;
  p->blockDimZ = v1.blockDimZ;
  p->sharedMemBytes = v1.sharedMemBytes;
  p->kernelParams = v1.kernelParams;
}

template <typename Params>
static CUresult get_kernel_node_params(CUgraphNode node, Params* p) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(p, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(node, kGraphNodeMagic), CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(node->type == CU_GRAPH_NODE_TYPE_KERNEL && node->op.launch,
                   CUDA_ERROR_INVALID_VALUE);
  describe_launch(*node->op.launch, p);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuGraphKernelNodeGetParams(CUgraphNode node,
                                                    CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return get_kernel_node_params(node, p);
}

FAKECUDA_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node,
                                                       CUDA_KERNEL_NODE_PARAMS* p) {
  return get_kernel_node_params(node, p);
}

// Changes the launch of an executable graph's copy of `node`; the graph it
// was made from keeps its own. The node must be a kernel node of that graph.
template <typename Params>
static CUresult set_exec_kernel_node_params(CUgraphExec exec, CUgraphNode node, const Params* p) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(p, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(exec, kGraphExecMagic) && d.is_live(node, kGraphNodeMagic),
                   CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(node->type == CU_GRAPH_NODE_TYPE_KERNEL, CUDA_ERROR_INVALID_VALUE);
  auto copy = std::find_if(exec->order.begin(), exec->order.end(),
                           [node](const CUgraphNode_st& n) { return n.origin == node; });
  FAKECUDA_REQUIRE(copy != exec->order.end(), CUDA_ERROR_INVALID_VALUE);
  CUctx_st* ctx = nullptr;
  CUfunction func = node_function(p, &ctx);
  Op op;
  if (CUresult r = kernel_op_locked(func, node_shape(p), p->kernelParams, p->extra, &op, ctx);
      r != CUDA_SUCCESS)
    return r;
  copy->op = std::move(op);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                        const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return set_exec_kernel_node_params(exec, node, p);
}

FAKECUDA_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                           const CUDA_KERNEL_NODE_PARAMS* p) {
  return set_exec_kernel_node_params(exec, node, p);
}

FAKECUDA_EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode* out, CUgraph graph,
                                             const CUgraphNode* deps, size_t count) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(graph, kGraphMagic), CUDA_ERROR_INVALID_VALUE);
  std::vector<CUgraphNode_st*> dependencies;
  if (CUresult r = checked_deps(graph, deps, count, &dependencies); r != CUDA_SUCCESS) return r;
  *out = add_node(graph, CU_GRAPH_NODE_TYPE_EMPTY, std::move(dependencies));
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuGraphAddHostNode(CUgraphNode* out, CUgraph graph,
                                            const CUgraphNode* deps, size_t count,
                                            const CUDA_HOST_NODE_PARAMS* p) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out && p && p->fn, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(graph, kGraphMagic), CUDA_ERROR_INVALID_VALUE);
  std::vector<CUgraphNode_st*> dependencies;
  if (CUresult r = checked_deps(graph, deps, count, &dependencies); r != CUDA_SUCCESS) return r;
  CUgraphNode_st* node = add_node(graph, CU_GRAPH_NODE_TYPE_HOST, std::move(dependencies));
  CUhostFn fn = p->fn;
  void* data = p->userData;
  node->op = action_op([fn, data](uint64_t) { fn(data); });
  node->op.run_unlocked = true;
  *out = node;
  return CUDA_SUCCESS;
}

// A child graph node owns its graph: a copy of the one given, or (moved, an
// option of cuGraphAddNode) that graph itself, which may then hold memory
// nodes. Caller holds Driver::mu and has checked `graph`.
static CUresult add_child_graph_node_locked(CUgraphNode* out, CUgraph graph,
                                            std::vector<CUgraphNode_st*> deps, CUgraph child,
                                            CUgraphChildGraphNodeOwnership ownership) {
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.is_live(child, kGraphMagic) && !child->owned && !contains_graph(child, graph),
                   CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE ||
                       ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE,
                   CUDA_ERROR_INVALID_VALUE);
  // Memory nodes may only move into a parent: a copy could allocate twice.
  FAKECUDA_REQUIRE(ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE || !has_memory_nodes(child),
                   CUDA_ERROR_INVALID_VALUE);
  CUgraphNode_st* node = add_node(graph, CU_GRAPH_NODE_TYPE_GRAPH, std::move(deps));
  node->child =
      ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE ? child : clone_graph_locked(child);
  node->child->owned = true;
  *out = node;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuGraphAddChildGraphNode(CUgraphNode* out, CUgraph graph,
                                                  const CUgraphNode* deps, size_t count,
                                                  CUgraph child) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(graph, kGraphMagic), CUDA_ERROR_INVALID_VALUE);
  std::vector<CUgraphNode_st*> dependencies;
  if (CUresult r = checked_deps(graph, deps, count, &dependencies); r != CUDA_SUCCESS) return r;
  return add_child_graph_node_locked(out, graph, std::move(dependencies), child,
                                     CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE);
}

FAKECUDA_EXPORT CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph* graph) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(graph, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(node, kGraphNodeMagic) && node->type == CU_GRAPH_NODE_TYPE_GRAPH,
                   CUDA_ERROR_INVALID_VALUE);
  *graph = node->child;
  return CUDA_SUCCESS;
}

// The generic way to add a node. Simulated for child graphs (either
// ownership), memory allocations and empty nodes; other types are refused
// with CUDA_ERROR_NOT_SUPPORTED.
static CUresult add_node_with_params(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                                     const CUgraphEdgeData* edges, size_t count,
                                     CUgraphNodeParams* params) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out && params, CUDA_ERROR_INVALID_VALUE);
  // Edge data other than the default (all zero) is not simulated.
  for (size_t i = 0; edges && i < count; ++i)
    FAKECUDA_REQUIRE(edges[i].from_port == 0 && edges[i].to_port == 0 && edges[i].type == 0,
                     CUDA_ERROR_NOT_SUPPORTED);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(graph, kGraphMagic), CUDA_ERROR_INVALID_VALUE);
  std::vector<CUgraphNode_st*> dependencies;
  if (CUresult r = checked_deps(graph, deps, count, &dependencies); r != CUDA_SUCCESS) return r;
  switch (params->type) {
    case CU_GRAPH_NODE_TYPE_GRAPH:
      return add_child_graph_node_locked(out, graph, std::move(dependencies), params->graph.graph,
                                         params->graph.ownership);
    case CU_GRAPH_NODE_TYPE_EMPTY:
      *out = add_node(graph, CU_GRAPH_NODE_TYPE_EMPTY, std::move(dependencies));
      return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
      const CUDA_MEM_ALLOC_NODE_PARAMS_v2& alloc = params->alloc;
      FAKECUDA_REQUIRE(alloc.poolProps.allocType == CU_MEM_ALLOCATION_TYPE_PINNED &&
                           alloc.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE,
                       CUDA_ERROR_INVALID_VALUE);
      CUgraphNode_st* node = nullptr;
      if (CUresult r = add_mem_alloc_node(std::move(dependencies), graph, alloc.bytesize,
                                          alloc.poolProps.location.id, &node, &params->alloc.dptr);
          r != CUDA_SUCCESS)
        return r;
      *out = node;
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

FAKECUDA_EXPORT CUresult cuGraphAddNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                                        size_t count, CUgraphNodeParams* params) {
  return add_node_with_params(out, graph, deps, nullptr, count, params);
}

FAKECUDA_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                                           const CUgraphEdgeData* edges, size_t count,
                                           CUgraphNodeParams* params) {
  return add_node_with_params(out, graph, deps, edges, count, params);
}

FAKECUDA_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* out, CUgraph graph,
                                                const CUgraphNode* deps, size_t count,
                                                CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out && p, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(p->poolProps.allocType == CU_MEM_ALLOCATION_TYPE_PINNED &&
                       p->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE,
                   CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(graph, kGraphMagic), CUDA_ERROR_INVALID_VALUE);
  std::vector<CUgraphNode_st*> dependencies;
  if (CUresult r = checked_deps(graph, deps, count, &dependencies); r != CUDA_SUCCESS) return r;
  CUgraphNode_st* node = nullptr;
  if (CUresult r = add_mem_alloc_node(std::move(dependencies), graph, p->bytesize,
                                      p->poolProps.location.id, &node, &p->dptr);
      r != CUDA_SUCCESS)
    return r;
  *out = node;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode* out, CUgraph graph,
                                               const CUgraphNode* deps, size_t count,
                                               CUdeviceptr dptr) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(graph, kGraphMagic), CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(graph_addresses().count(dptr), CUDA_ERROR_INVALID_VALUE);
  std::vector<CUgraphNode_st*> dependencies;
  if (CUresult r = checked_deps(graph, deps, count, &dependencies); r != CUDA_SUCCESS) return r;
  CUgraphNode_st* node = add_node(graph, CU_GRAPH_NODE_TYPE_MEM_FREE, std::move(dependencies));
  node->dptr = dptr;
  *out = node;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(count, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(graph, kGraphMagic), CUDA_ERROR_INVALID_VALUE);
  if (nodes)
    for (size_t i = 0; i < std::min(*count, graph->nodes.size()); ++i)
      nodes[i] = graph->nodes[i].get();
  *count = graph->nodes.size();
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(type, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(node, kGraphNodeMagic), CUDA_ERROR_INVALID_VALUE);
  *type = node->type;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node,
                                                      CUDA_MEM_ALLOC_NODE_PARAMS* params_out) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(params_out, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(node, kGraphNodeMagic) && node->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC,
                   CUDA_ERROR_INVALID_VALUE);
  *params_out = CUDA_MEM_ALLOC_NODE_PARAMS{};
  params_out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params_out->poolProps.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  params_out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params_out->poolProps.location.id = node->ordinal;
  params_out->bytesize = node->bytes;
  params_out->dptr = node->dptr;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuGraphMemFreeNodeGetParams(CUgraphNode node, CUdeviceptr* dptr_out) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(dptr_out, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(node, kGraphNodeMagic) && node->type == CU_GRAPH_NODE_TYPE_MEM_FREE,
                   CUDA_ERROR_INVALID_VALUE);
  *dptr_out = node->dptr;
  return CUDA_SUCCESS;
}

// The four ways to instantiate share one implementation. The two oldest
// (CUDA 10.0 and 11.0, same signature) take no flags and may describe an
// error in the caller's buffer.
static CUresult instantiate_with_log(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node,
                                     char* log, size_t log_size) {
  const CUresult result = instantiate(exec, graph);
  if (result != CUDA_SUCCESS) {
    if (error_node) *error_node = nullptr;
    if (log && log_size) std::snprintf(log, log_size, "the graph cannot be instantiated");
  }
  return result;
}

FAKECUDA_EXPORT CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph,
                                            CUgraphNode* error_node, char* log, size_t log_size) {
  return instantiate_with_log(exec, graph, error_node, log, log_size);
}

FAKECUDA_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph,
                                               CUgraphNode* error_node, char* log,
                                               size_t log_size) {
  return instantiate_with_log(exec, graph, error_node, log, log_size);
}

FAKECUDA_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                                     unsigned long long flags) {
  return instantiate(exec, graph, flags);
}

// The parameters say how it went; with the upload flag, the upload stream
// must be valid (uploading itself prepares nothing here).
static CUresult instantiate_with_params(CUgraphExec* exec, CUgraph graph,
                                        CUDA_GRAPH_INSTANTIATE_PARAMS* params, DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(params, CUDA_ERROR_INVALID_VALUE);
  params->hErrNode_out = nullptr;
  params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  if (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) {
    std::lock_guard<std::mutex> guard(Driver::get().mu);
    CUstream_st* used = nullptr;
    if (CUresult r = resolve_stream(params->hUploadStream, mode, &used); r != CUDA_SUCCESS)
      return r;
  }
  const CUresult result = instantiate(exec, graph, params->flags);
  if (result == CUDA_SUCCESS) params->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  return result;
}

FAKECUDA_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return instantiate_with_params(exec, graph, params, DefaultStream::kLegacy);
}

FAKECUDA_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return instantiate_with_params(exec, graph, params, DefaultStream::kPerThread);
}

FAKECUDA_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(exec, kGraphExecMagic), CUDA_ERROR_INVALID_VALUE);
  d.live.erase(exec);
  delete exec;  // queued ops hold copies of what they need
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
  return launch(exec, s, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) {
  return launch(exec, s, DefaultStream::kPerThread);
}

// Uploading prepares a launch; there is nothing to prepare here.
static CUresult upload(CUgraphExec exec, CUstream s, DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(exec, kGraphExecMagic), CUDA_ERROR_INVALID_VALUE);
  CUstream_st* used = nullptr;
  return resolve_stream(s, mode, &used);
}
FAKECUDA_EXPORT CUresult cuGraphUpload(CUgraphExec exec, CUstream s) {
  return upload(exec, s, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream s) {
  return upload(exec, s, DefaultStream::kPerThread);
}

// ---- Graph memory --------------------------------------------------------------------

FAKECUDA_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(device), CUDA_ERROR_INVALID_DEVICE);
  std::lock_guard<std::mutex> guard(d.mu);
  GraphPool& pool = graph_pools()[static_cast<size_t>(device)];
  const uint64_t keep = round_up(pool.used + pool.committed, kPageSize);
  if (pool.reserved > keep) {
    d.shared().uncharge(d.device(device).physical, pool.reserved - keep);
    pool.reserved = keep;
  }
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                                      void* value) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(value, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(device), CUDA_ERROR_INVALID_DEVICE);
  std::lock_guard<std::mutex> guard(d.mu);
  const GraphPool& pool = graph_pools()[static_cast<size_t>(device)];
  auto* out = static_cast<cuuint64_t*>(value);
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
      *out = pool.used;
      break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
      *out = pool.used_high;
      break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
      *out = pool.reserved;
      break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      *out = pool.reserved_high;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                                      void* value) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(value && *static_cast<cuuint64_t*>(value) == 0, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(device), CUDA_ERROR_INVALID_DEVICE);
  std::lock_guard<std::mutex> guard(d.mu);
  GraphPool& pool = graph_pools()[static_cast<size_t>(device)];
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
      pool.used_high = pool.used;
      break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      pool.reserved_high = pool.reserved;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
