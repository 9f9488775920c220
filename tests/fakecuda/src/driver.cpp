#include "driver.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "context.h"
#include "executor.h"
#include "trace.h"

namespace fakecuda {
namespace {

void child_after_fork() {
  Driver::get().after_fork_in_child();
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

bool starts_with_nocase(const std::string& text, const std::string& prefix) {
  if (prefix.size() > text.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  return true;
}

// CUDA_VISIBLE_DEVICES as the real driver reads it: a comma list of indices
// or (prefixes of) UUIDs; the first entry that is invalid, unknown, ambiguous
// or repeated ends the list.
std::vector<uint32_t> visible_devices(const MachineConfig& machine, const ProcessOptions& options) {
  std::vector<uint32_t> out;
  if (!options.visible_devices_set) {
    for (uint32_t i = 0; i < machine.device_count; ++i)
      out.push_back(i);
    return out;
  }
  size_t start = 0;
  const std::string& list = options.visible_devices;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string token = trim(list.substr(start, end - start));
    start = end + 1;
    int found = -1;
    if (starts_with_nocase(token, "GPU-")) {
      for (uint32_t i = 0; i < machine.device_count; ++i) {
        if (!starts_with_nocase(format_uuid(machine.devices[i].uuid), token)) continue;
        if (found >= 0) return out;  // ambiguous prefix
        found = static_cast<int>(i);
      }
    } else if (!token.empty() && token.find_first_not_of("0123456789") == std::string::npos &&
               token.size() < 4) {
      uint32_t index = static_cast<uint32_t>(std::stoul(token));
      if (index < machine.device_count) found = static_cast<int>(index);
    }
    if (found < 0) return out;
    for (uint32_t seen : out)
      if (seen == static_cast<uint32_t>(found)) return out;
    out.push_back(static_cast<uint32_t>(found));
  }
  return out;
}

}  // namespace

Driver& Driver::get() {
  // Never destroyed: entry points may run during and after static destruction.
  static Driver* driver = new Driver();
  return *driver;
}

CUresult Driver::init(unsigned flags) {
  // A forked child of an initialised process cannot use the driver, as with
  // the real one ("initialization error"). Checked before any lock, which a
  // parent thread may have held at fork time.
  int state = state_.load(std::memory_order_acquire);
  if (state == kReady) return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  if (state == kForked) return CUDA_ERROR_NOT_INITIALIZED;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;

  static std::mutex init_mu;
  std::lock_guard<std::mutex> guard(init_mu);
  state = state_.load(std::memory_order_acquire);
  if (state == kReady) return CUDA_SUCCESS;
  if (state == kFailed) return init_result_;

  auto fail = [&](CUresult result, const std::string& message) {
    if (!message.empty()) std::fprintf(stderr, "fakecuda: %s\n", message.c_str());
    init_result_ = result;
    state_.store(kFailed, std::memory_order_release);
    return result;
  };

  std::string error;
  if (!load_config(config_, error)) return fail(CUDA_ERROR_UNKNOWN, error);
  shared_ = SharedState::open(config_.process.state_path, config_.machine, error);
  if (!shared_) return fail(CUDA_ERROR_OPERATING_SYSTEM, error);
  for (uint32_t physical : visible_devices(config_.machine, config_.process))
    visible_.push_back(VisibleDevice{physical, &config_.machine.devices[physical]});
  if (visible_.empty()) return fail(CUDA_ERROR_NO_DEVICE, "");
  if (!shared_->attach())
    return fail(CUDA_ERROR_OPERATING_SYSTEM, "all " + std::to_string(kMaxProcesses) +
                                                 " process slots of " + config_.process.state_path +
                                                 " are taken");

  tracer_ = new Tracer(config_.process.trace_path);
  executor_ = new Executor();
  primary.assign(visible_.size(), nullptr);
  for (size_t i = 0; i < visible_.size(); ++i)
    primary_handle.push_back(new_primary_handle(static_cast<CUdevice>(i)));
  primary_refs.assign(visible_.size(), 0);
  primary_flags.assign(visible_.size(), 0);
  default_pool.assign(visible_.size(), nullptr);
  current_pool.assign(visible_.size(), nullptr);

  static bool registered = false;
  if (!registered) {
    pthread_atfork(nullptr, nullptr, child_after_fork);
    registered = true;
  }
  state_.store(kReady, std::memory_order_release);
  return CUDA_SUCCESS;
}

void Driver::after_fork_in_child() {
  if (state_.load(std::memory_order_relaxed) != kReady) return;
  state_.store(kForked, std::memory_order_relaxed);
  shared_->forget_after_fork();
}

bool Driver::is_live(const void* handle, uint32_t magic) const {
  return handle && live.count(handle) && *static_cast<const uint32_t*>(handle) == magic;
}

bool debug_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("FAKECUDA_DEBUG");
    return value && *value && std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

bool debug_calls_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("FAKECUDA_DEBUG");
    return value && std::strcmp(value, "calls") == 0;
  }();
  return enabled;
}

ContextStack& context_stack() {
  thread_local constinit ContextStack stack{};
  return stack;
}

CUstream_st* new_stream(CUctx_st* ctx, CUstream_st::Kind kind, unsigned flags, int priority) {
  Driver& d = Driver::get();
  auto* s = new CUstream_st{};
  s->magic = kStreamMagic;
  s->kind = kind;
  s->ctx = ctx;
  s->flags = flags;
  s->priority = priority;
  s->id = d.next_stream_id++;
  s->capture = nullptr;
  ctx->streams.push_back(s);
  d.live.insert(s);
  return s;
}

CUresult resolve_stream(CUstream handle, DefaultStream mode, CUstream_st** out) {
  Driver& d = Driver::get();
  if (handle == nullptr)
    handle = mode == DefaultStream::kPerThread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
  if (handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    CUctx_st* ctx = current_context();
    if (!live_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (handle == CU_STREAM_LEGACY) {
      *out = ctx->legacy_stream;
      return CUDA_SUCCESS;
    }
    thread_local std::map<CUctx_st*, CUstream_st*> per_thread;
    CUstream_st*& s = per_thread[ctx];
    if (!d.is_live(s, kStreamMagic) || s->ctx != ctx)
      s = new_stream(ctx, CUstream_st::Kind::kPerThread, 0, 0);
    *out = s;
    return CUDA_SUCCESS;
  }
  if (!d.is_live(handle, kStreamMagic)) return CUDA_ERROR_INVALID_HANDLE;
  *out = handle;
  return CUDA_SUCCESS;
}

Allocation* find_allocation(uintptr_t ptr) {
  auto& allocations = Driver::get().allocations;
  auto it = allocations.upper_bound(ptr);
  if (it == allocations.begin()) return nullptr;
  --it;
  Allocation& a = it->second;
  return ptr < a.base + std::max<size_t>(a.size, 1) ? &a : nullptr;
}

void* map_device_memory(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void unmap_device_memory(void* base, size_t bytes) {
  munmap(base, bytes);
}

}  // namespace fakecuda
