// The driver's objects. cuda.h only declares the handle types (`struct
// CUctx_st*` and friends); the simulator defines them, so a handle is a
// pointer to one of these and is checked against the live registry before use.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "context_storage.h"
#include "image.h"

namespace fakecuda {

struct Capture;
struct KernelLaunch;
struct Module;

// What an exported event shares: the last generation recorded and the last
// completed, in any process.
struct IpcEventPage {
  std::atomic<uint64_t> recorded;
  std::atomic<uint64_t> completed;
};

// Why an allocation exists decides how it is freed and reported.
enum class AllocationKind {
  kLinear,   // cuMemAlloc, cuMemAllocPitch
  kManaged,  // cuMemAllocManaged
  kHost,     // page-locked host memory; never charged
  kPool,     // stream-ordered, from a memory pool that owns the charge
  kGraph,    // from a graph's memory node; the graph pool owns the charge
  kMapped,   // a VMM range mapped to a physical allocation, which owns the charge
  kIpc,      // another process's memory opened with cuIpcOpenMemHandle; charged there
  kModule,   // a module's variable; the module owns the memory and the charge
};

struct Allocation {
  uintptr_t base = 0;
  size_t size = 0;       // what the caller asked for
  size_t mapped = 0;     // bytes of address space we own behind `base` (0: not ours)
  uint64_t charged = 0;  // device bytes charged for it (0 when a pool owns the charge)
  uint32_t physical = 0;
  int ordinal = 0;
  AllocationKind kind = AllocationKind::kLinear;
  CUctx_st* ctx = nullptr;
  CUmemoryPool pool = nullptr;
  uint64_t buffer_id = 0;    // CU_POINTER_ATTRIBUTE_BUFFER_ID, given at the first query
  bool sync_memops = false;  // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
  unsigned host_flags = 0;   // cuMemHostAlloc / cuMemHostRegister flags
  // IPC: an exported allocation is backed by memfd `ipc_fd` (-1 until the
  // first cuIpcGetMemHandle) with shared-state record `ipc_record`; an opened
  // one (kIpc) holds an open of that record.
  int ipc_fd = -1;
  uint32_t ipc_record = 0;
  uint64_t ipc_id = 0;
  uint32_t ipc_refs = 0;  // kIpc: cuIpcOpenMemHandle calls not yet closed
  // Managed memory: cuMemAdvise and cuMemPrefetchAsync, for the whole
  // allocation (location type NONE: never given).
  bool read_mostly = false;
  CUmemLocation preferred{};
  CUmemLocation last_prefetch{};
  uint32_t accessed_by = 0;  // bit per device ordinal
};

// One unit of work in a stream. Kernels occupy the device timeline for
// `duration_ns`; every other kind is instantaneous and runs `action` when it
// reaches the head of its stream and is ready.
struct Op {
  enum class Kind { kKernel, kAction, kWaitEvent };
  Kind kind = Kind::kAction;
  uint64_t seq = 0;  // order within the context, for legacy-stream semantics
  uint64_t enqueue_ns = 0;
  // kKernel
  uint64_t duration_ns = 0;
  std::shared_ptr<const std::string> name;
  // The launch as asked for, its arguments copied as the driver copies them
  // (what a graph's kernel node answers cuGraphKernelNodeGetParams with).
  std::shared_ptr<const KernelLaunch> launch;
  // kAction: receives the op's completion time on the device clock
  std::function<void(uint64_t done_ns)> action;
  // kWaitEvent
  CUevent_st* event = nullptr;
  uint64_t generation = 0;
  // When set, the op may start only once it answers true: waits on memory
  // or on another process's event, which the executor polls.
  std::function<bool()> poll;
  bool run_unlocked = false;  // user callbacks run without Driver::mu
  // Filled in by the executor
  bool started = false;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

}  // namespace fakecuda

// A primary context's object exists from cuInit on, so that its handle is
// the same before it is first retained, while active and after a reset, as
// with the real driver; it is live (in Driver::live) only while active.
struct CUctx_st {
  uint32_t magic;
  int ordinal;        // CUDA device ordinal (after CUDA_VISIBLE_DEVICES)
  uint32_t physical;  // index on the machine
  bool primary;
  unsigned flags;
  uint64_t heap_bytes;  // CU_LIMIT_MALLOC_HEAP_SIZE beyond the default, charged
  size_t limits[CU_LIMIT_MAX];
  CUfunc_cache cache_config;  // cuCtxSetCacheConfig's preference
  int attached;               // cuCtxAttach calls not yet matched by cuCtxDetach
  uint64_t id;
  uint64_t next_seq;
  CUstream_st* legacy_stream;
  std::vector<CUstream_st*> streams;  // every stream of the context, the legacy one included
  std::unique_ptr<fakecuda::ContextStorage> storage;  // the runtime's context-local storage
  std::vector<uint64_t> peers;  // ids of the contexts it may access (cuCtxEnablePeerAccess)
};

struct CUstream_st {
  enum class Kind { kUser, kLegacy, kPerThread };
  uint32_t magic;
  Kind kind;
  CUctx_st* ctx;
  unsigned flags;
  int priority;
  uint64_t id;
  std::deque<fakecuda::Op> queue;  // head may be executing
  uint64_t clock_ns;               // completion time of the last op done
  bool destroyed;                  // handle gone; freed once the queue drains
  fakecuda::Capture* capture;      // non-null while capturing
  std::vector<CUgraphNode_st*> capture_tail;

  bool blocking() const { return kind != Kind::kUser || !(flags & CU_STREAM_NON_BLOCKING); }
};

struct CUevent_st {
  uint32_t magic;
  CUctx_st* ctx;
  unsigned flags;
  uint64_t recorded;   // generation of the last record enqueued
  uint64_t completed;  // generation of the last record executed
  uint64_t time_ns;    // device time of the last executed record
  uint32_t pending;    // queued ops that refer to the event
  bool destroyed;      // handle gone; freed once nothing refers to it
  // Set when recorded into a capture: the nodes a wait on it depends on.
  fakecuda::Capture* capture;
  std::vector<CUgraphNode_st*> capture_nodes;
  // Interprocess events keep their generations in a page shared with the
  // processes that opened them (null until exported or when not imported).
  fakecuda::IpcEventPage* ipc;
  int ipc_fd;  // with `ipc`: its memfd when exported here, -1 when opened

  ~CUevent_st();  // unmaps `ipc`, closes `ipc_fd`
};

namespace fakecuda {
// The last generation of `e` that completed, in this process or, for an
// interprocess event, in any.
inline uint64_t completed_generation(const CUevent_st* e) {
  if (!e->ipc) return e->completed;
  const uint64_t shared = e->ipc->completed.load(std::memory_order_acquire);
  return shared > e->completed ? shared : e->completed;
}
inline uint64_t recorded_generation(const CUevent_st* e) {
  return e->ipc ? e->ipc->recorded.load(std::memory_order_acquire) : e->recorded;
}
}  // namespace fakecuda
// What cuFuncSetAttribute may change; the rest of a function's attributes
// are fixed answers (see module.cpp).
struct FunctionAttributes {
  int max_dynamic_shared = 48 << 10;  // opt-in beyond 48 KiB, up to the device's limit
  int carveout = -1;                  // CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
  int cluster[3] = {0, 0, 0};         // required cluster width, height, depth
  int non_portable_cluster = 0;
  int cluster_scheduling = 0;
  CUfunc_cache cache = CU_FUNC_CACHE_PREFER_NONE;
};

struct CUfunc_st {
  uint32_t magic;
  CUmod_st* module;
  std::shared_ptr<const std::string> name;
  std::vector<uint32_t> param_sizes;    // bytes of each parameter, from the image
  std::vector<uint32_t> param_offsets;  // offset of each in the parameter buffer
  bool timed;                           // first parameter is the duration in ns
  bool loaded;                          // lazy loading: false until first launch or cuFuncLoad
  CUkern_st* kernel;                    // the library kernel it is the context's copy of
  FunctionAttributes attributes;
};

// A module-scope variable (__device__, __constant__, __managed__), placed in
// device memory with its initial bytes when the module is loaded.
struct ModuleGlobal {
  std::string name;
  uintptr_t address;
  size_t size;
  bool managed;
};

struct CUmod_st {
  uint32_t magic;
  CUctx_st* ctx;
  uint64_t charged;  // code and variables, in pages
  std::vector<std::unique_ptr<CUfunc_st>> functions;
  std::vector<ModuleGlobal> globals;
  void* globals_base;     // one mapping holds every variable
  size_t globals_mapped;  // its length
  CUlib_st* library;      // set for a library's per-context module
};

// A library: an image read once, loaded into each context where it is used
// (lazily at first use, or at load and context creation with
// CUDA_MODULE_LOADING=EAGER).
struct CUlib_st {
  uint32_t magic;
  std::shared_ptr<const fakecuda::Image> image;
  std::vector<std::unique_ptr<CUkern_st>> kernels;  // one per kernel of the image
  std::map<CUctx_st*, CUmod_st*> modules;           // per context where it is loaded
};

// A library's kernel, context-independent; each context gets a CUfunction.
struct CUkern_st {
  uint32_t magic;
  CUlib_st* library;
  size_t index;                                       // into the image's kernels
  std::map<CUdevice, FunctionAttributes> attributes;  // set per device with cuKernelSetAttribute
};

namespace fakecuda {
// An array's bytes, made at its first copy (rows of Width elements, Height
// rows a slice, packed).
struct ArrayBytes {
  void* data = nullptr;
  size_t bytes = 0;
  ArrayBytes() = default;
  ArrayBytes(const ArrayBytes&) = delete;
  ArrayBytes& operator=(const ArrayBytes&) = delete;
  ~ArrayBytes();
};
}  // namespace fakecuda

struct CUarray_st {
  uint32_t magic;
  CUctx_st* ctx;
  CUDA_ARRAY3D_DESCRIPTOR desc;
  uint64_t charged;            // 0 for the levels of a mipmapped array
  CUmipmappedArray_st* owner;  // set for the levels of a mipmapped array
  fakecuda::ArrayBytes contents;
};

struct CUmipmappedArray_st {
  uint32_t magic;
  CUctx_st* ctx;
  uint64_t charged;
  std::vector<std::unique_ptr<CUarray_st>> levels;
};

struct CUmemPoolHandle_st {
  uint32_t magic;
  int ordinal;
  uint32_t physical;
  bool is_default;
  uint64_t reserved;  // bytes charged to the device for the pool
  uint64_t used;      // bytes handed out and not yet freed
  uint64_t reserved_high;
  uint64_t used_high;
  uint64_t release_threshold;
};
