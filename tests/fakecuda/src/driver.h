// The process's simulated driver: initialisation, the device list seen through
// CUDA_VISIBLE_DEVICES, the registries of live handles, and the helpers every
// entry point uses to validate its arguments the way the real driver does.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <set>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "config.h"
#include "objects.h"
#include "shared_state.h"

// Entry points are the real driver's names, exported with C linkage.
#define FAKECUDA_EXPORT extern "C" __attribute__((visibility("default")))

namespace fakecuda {

class Executor;
class Tracer;

// Tags stored in each object so that a stale or foreign handle is refused.
enum Magic : uint32_t {
  kContextMagic = 0xc0'7e'c7'01,
  kStreamMagic = 0x57'7e'a3'02,
  kEventMagic = 0xe7'e0'7f'03,
  kModuleMagic = 0x30'd0'1e'04,
  kFunctionMagic = 0xf0'0c'7a'05,
  kArrayMagic = 0xa7'7a'e1'06,
  kMipmapMagic = 0x31'b3'a9'07,
  kPoolMagic = 0x90'01'90'08,
  kGraphMagic = 0x97'a9'40'09,
  kGraphNodeMagic = 0x40'de'00'0a,
  kGraphExecMagic = 0xe4'ec'00'0b,
  kLibraryMagic = 0x11'b2'a3'0c,
  kKernelMagic = 0x4e'73'e1'0d,
  kLinkMagic = 0x11'4c'00'0e,
};

inline constexpr uint64_t kPageSize = 2ull << 20;  // device memory is charged in 2 MiB pages
inline constexpr uint64_t round_up(uint64_t value, uint64_t to) {
  return (value + to - 1) / to * to;
}

struct VisibleDevice {
  uint32_t physical;
  const DeviceConfig* config;
};

class Driver {
 public:
  static Driver& get();

  CUresult init(unsigned flags);
  // Every entry point but a handful starts here.
  CUresult check() const {
    return state_.load(std::memory_order_acquire) == kReady ? CUDA_SUCCESS
                                                            : CUDA_ERROR_NOT_INITIALIZED;
  }
  void after_fork_in_child();

  const Config& config() const { return config_; }
  SharedState& shared() { return *shared_; }
  Executor& executor() { return *executor_; }
  Tracer& tracer() { return *tracer_; }

  int device_count() const { return static_cast<int>(visible_.size()); }
  bool valid_device(CUdevice dev) const { return dev >= 0 && dev < device_count(); }
  const VisibleDevice& device(CUdevice dev) const { return visible_[static_cast<size_t>(dev)]; }

  // The big lock: registries, stream queues, contexts. Held only for
  // bookkeeping, never across a wait or a user callback.
  std::mutex mu;
  std::condition_variable progress;  // signalled whenever ops complete

  // Live handles, for validation.
  std::unordered_set<const void*> live;
  std::vector<CUctx_st*> contexts;              // live contexts, for the executor
  std::map<uintptr_t, Allocation> allocations;  // by base address
  std::vector<CUctx_st*> primary;               // per ordinal, the active primary context or null
  std::vector<CUctx_st*> primary_handle;        // per ordinal, the primary context's object
  std::vector<int> primary_refs;
  std::vector<unsigned> primary_flags;
  std::vector<CUmemPoolHandle_st*> default_pool;  // per ordinal
  std::vector<CUmemoryPool> current_pool;         // per ordinal
  uint64_t next_stream_id = 1;

  bool is_live(const void* handle, uint32_t magic) const;

 private:
  enum State { kNone, kReady, kFailed, kForked };
  Driver() = default;

  std::atomic<int> state_{kNone};
  CUresult init_result_ = CUDA_SUCCESS;
  Config config_;
  SharedState* shared_ = nullptr;
  Executor* executor_ = nullptr;
  Tracer* tracer_ = nullptr;
  std::vector<VisibleDevice> visible_;
};

// FAKECUDA_DEBUG=1 (read once, and usable before cuInit): the simulator says
// on stderr what it was asked for and does not have (lookups answered NULL,
// private tables and slots not simulated), which is how to find what a
// library needs of the driver.
bool debug_enabled();
// FAKECUDA_DEBUG=calls: cuGetProcAddress also hands out pointers that name on
// stderr every call that does not return CUDA_SUCCESS (entry_points.cpp).
bool debug_calls_enabled();

// A thread's stack of current contexts (cuCtxPushCurrent/PopCurrent).
// Trivially destructible, so that it is never destroyed: a library's exit
// handler that releases its context (cuBLAS's does) runs after the main
// thread's thread-locals are gone, and found a destroyed vector here.
class ContextStack {
 public:
  static constexpr size_t kCapacity = 256;  // a deeper push is refused (out of memory)
  bool empty() const { return size_ == 0; }
  CUctx_st*& back() { return items_[size_ - 1]; }
  bool push(CUctx_st* ctx) {
    if (size_ == kCapacity) return false;
    items_[size_++] = ctx;
    return true;
  }
  void pop() { --size_; }
  // Takes every entry of `ctx` out.
  void remove(CUctx_st* ctx) {
    size_ = static_cast<size_t>(std::remove(items_, items_ + size_, ctx) - items_);
  }

 private:
  CUctx_st* items_[kCapacity];
  size_t size_;
};
static_assert(std::is_trivially_destructible_v<ContextStack>);

ContextStack& context_stack();
inline CUctx_st* current_context() {
  auto& stack = context_stack();
  return stack.empty() ? nullptr : stack.back();
}

// Resolves a stream handle as the driver does: NULL is the legacy default
// stream (or the per-thread one for _ptsz entry points), CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD name them explicitly. Caller holds Driver::mu.
// Returns CUDA_ERROR_INVALID_CONTEXT / CUDA_ERROR_INVALID_HANDLE as the real one.
enum class DefaultStream { kLegacy, kPerThread };
CUresult resolve_stream(CUstream handle, DefaultStream mode, CUstream_st** out);

// Creates a stream object in `ctx` (caller holds Driver::mu).
CUstream_st* new_stream(CUctx_st* ctx, CUstream_st::Kind kind, unsigned flags, int priority);

// Destroys a context's streams, events-agnostic state and memory (caller holds
// Driver::mu and has drained the context).
void release_context_locked(CUctx_st* ctx);

// Finds the allocation containing `ptr` (caller holds Driver::mu).
Allocation* find_allocation(uintptr_t ptr);

// Device memory backing: address space that reads as zero until written.
void* map_device_memory(size_t bytes);
void unmap_device_memory(void* base, size_t bytes);

// Validates that `ctx` is a live context (caller holds Driver::mu).
inline bool live_context(CUctx_st* ctx) {
  return ctx && Driver::get().is_live(ctx, kContextMagic);
}

}  // namespace fakecuda

// Checks used at the top of entry points.
#define FAKECUDA_REQUIRE_INIT()                                                                  \
  do {                                                                                           \
    if (CUresult _fc_r = ::fakecuda::Driver::get().check(); _fc_r != CUDA_SUCCESS) return _fc_r; \
  } while (0)

#define FAKECUDA_REQUIRE(cond, error) \
  do {                                \
    if (!(cond)) return (error);      \
  } while (0)
