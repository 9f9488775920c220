// allocator: takes device memory through one allocation path until a target
// is reached or the driver refuses, gives it all back, and reports what the
// driver said along the way as one key=value line (see ../README.md).
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "allocation_path.h"
#include "allocation_round.h"
#include "command_line.h"
#include "cu_check.h"
#include "device_session.h"
#include "driver_api.h"
#include "report_line.h"

namespace workloads {
namespace {

struct AllocatorOptions {
  AllocationKind path = AllocationKind::linear;
  uint64_t target = 0;  // 0: until the driver refuses
  uint64_t chunk = 256ull << 20;
  unsigned threads = 1;
  uint64_t rounds = 1;  // 0: until killed
  double hold_seconds = 0;
  bool retry = false;
  bool info = false;
  DriverOptions driver;
};

// With no --target, the allocator stops at this many times the device's
// memory even if the driver never refuses (managed memory can oversubscribe).
constexpr uint64_t kUnboundedTargetFactor = 2;

struct MemoryInfo {
  uint64_t free = 0;
  uint64_t total = 0;
};

CUresult query_memory(MemoryInfo& info) {
  size_t free = 0, total = 0;
  CU_CHECK(cuMemGetInfo(&free, &total));
  info = {free, total};
  return CUDA_SUCCESS;
}

uint64_t round_up(uint64_t value, uint64_t unit) {
  return (value + unit - 1) / unit * unit;
}

// One path a thread, each used by its own thread only.
using Paths = std::vector<std::unique_ptr<AllocationPath>>;

CUresult release_all(const Paths& paths) {
  for (const auto& path : paths)
    RETURN_IF_ERROR(path->release_all());
  return CUDA_SUCCESS;
}

void add_round(ReportLine& report, const std::string& prefix, const Round& round) {
  report.add(prefix + "bytes", round.bytes)
      .add(prefix + "chunks", round.chunks)
      .add(prefix + "error", round.error == CUDA_SUCCESS ? "none" : error_name(round.error))
      .add(prefix + "error_code", static_cast<int>(round.error));
}

void report_unexpected(const AllocatorOptions& options, const Round& round) {
  report_error("--path " + std::string(to_string(options.path)) + ": an allocation failed with " +
               error_name(round.error) + " (" + std::to_string(static_cast<int>(round.error)) +
               "), not CUDA_ERROR_OUT_OF_MEMORY");
}

// Rounds after the first, each allocating up to the target and freeing it
// all, for as long as --rounds says. Announced with an event=looping line, so
// that a test can kill the process while it allocates and frees.
CUresult repeat_rounds(const AllocatorOptions& options, const Paths& paths, uint64_t target,
                       CUcontext context, uint64_t& completed) {
  if (options.rounds == 1) return CUDA_SUCCESS;
  ReportLine looping;
  looping.add("workload", "allocator")
      .add("event", "looping")
      .add("pid", static_cast<int64_t>(getpid()));
  looping.print();
  while (options.rounds == 0 || completed < options.rounds) {
    const Round round = allocate_until(paths, target, options.chunk, context);
    if (!is_expected(round.error)) {
      report_unexpected(options, round);
      return round.error;
    }
    RETURN_IF_ERROR(release_all(paths));
    ++completed;
  }
  return CUDA_SUCCESS;
}

int run(const AllocatorOptions& options) {
  std::string error;
  if (!load_driver_api(options.driver.access, options.driver.stream_mode, error)) {
    report_error(error);
    return kExitFailure;
  }
  DeviceSession session;
  if (session.open(options.driver.device) != CUDA_SUCCESS) return kExitFailure;

  ReportLine report;
  report.add("workload", "allocator")
      .add("path", to_string(options.path))
      .add("access", to_string(options.driver.access))
      .add("stream_mode", to_string(options.driver.stream_mode))
      .add("device", session.ordinal());

  MemoryInfo before;
  if (query_memory(before) != CUDA_SUCCESS) return kExitFailure;

  if (options.info) {
    if (session.describe(report) != CUDA_SUCCESS) return kExitFailure;
    report.add("total", before.total).add("free", before.free);
    report.print();
    return kExitOk;
  }

  const uint64_t target = options.target
                              ? options.target
                              : round_up(kUnboundedTargetFactor * before.total, kAllocationUnit);
  Paths paths;
  for (unsigned i = 0; i < options.threads; ++i)
    paths.push_back(make_allocation_path(options.path, session.device()));

  const Round first = allocate_until(paths, target, options.chunk, session.context());
  MemoryInfo allocated;
  if (query_memory(allocated) != CUDA_SUCCESS) return kExitFailure;

  if (options.hold_seconds > 0) {
    // Announced before the wait, so that a test knows the memory is held and
    // can look at it from another process, or kill this one.
    ReportLine holding;
    holding.add("workload", "allocator")
        .add("event", "holding")
        .add("pid", static_cast<int64_t>(getpid()))
        .add("bytes", first.bytes)
        .add("free_after_alloc", allocated.free);
    holding.print();
    std::this_thread::sleep_for(std::chrono::duration<double>(options.hold_seconds));
  }

  if (release_all(paths) != CUDA_SUCCESS) return kExitFailure;
  MemoryInfo released;
  if (query_memory(released) != CUDA_SUCCESS) return kExitFailure;

  report.add("target", target)
      .add("chunk", options.chunk)
      .add("threads", options.threads)
      .add("total", before.total)
      .add("free_before", before.free);
  add_round(report, "", first);
  report.add("thread_bytes", first.thread_bytes)
      .add("free_after_alloc", allocated.free)
      .add("free_after_free", released.free);
  if (options.path == AllocationKind::pool) {
    uint64_t reserved = 0;
    for (const auto& path : paths)
      reserved += path->reserved_after_release();
    report.add("pool_reserved_after_trim", reserved);
  }
  uint64_t rounds = 1;
  if (is_expected(first.error) &&
      repeat_rounds(options, paths, target, session.context(), rounds) != CUDA_SUCCESS)
    return kExitFailure;
  report.add("rounds", rounds);

  Round again;
  if (options.retry) {
    // The same amount once more: what was given back must be obtainable again.
    again = allocate_until(paths, first.bytes, options.chunk, session.context());
    if (release_all(paths) != CUDA_SUCCESS) return kExitFailure;
    MemoryInfo after_retry;
    if (query_memory(after_retry) != CUDA_SUCCESS) return kExitFailure;
    add_round(report, "retry_", again);
    report.add("free_after_retry_free", after_retry.free);
  }
  report.print();

  const Round& failed = is_expected(first.error) ? again : first;
  if (!is_expected(failed.error)) {
    report_unexpected(options, failed);
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace
}  // namespace workloads

int main(int argc, char** argv) {
  using namespace workloads;
  AllocatorOptions options;
  CLI::App app(
      "Allocates device memory through one allocation path until --target is reached or the "
      "driver refuses, frees it, and prints one line of key=value pairs (see "
      "tests/workloads/README.md). Running out of memory is a result: the exit status is 0.",
      "allocator");
  app.add_option_function<std::string>(
         "--path",
         [&options](const std::string& text) { options.path = *parse_allocation_kind(text); },
         "Allocation path: linear (cuMemAlloc), pitch (cuMemAllocPitch), managed "
         "(cuMemAllocManaged), async (cuMemAllocAsync, default pool), pool "
         "(cuMemAllocFromPoolAsync, own pool, trimmed on free), vmm (cuMemCreate + "
         "cuMemMap), array (cuArrayCreate), array3d (cuArray3DCreate), mipmap "
         "(cuMipmappedArrayCreate)")
      ->check(CLI::IsMember(
          {"linear", "pitch", "managed", "async", "pool", "vmm", "array", "array3d", "mipmap"}))
      ->default_str("linear");
  add_byte_size_option(app, "--target", options.target,
                       "Bytes to allocate in all, a multiple of 2M (default: until the driver "
                       "refuses, at most twice the device's memory)");
  add_byte_size_option(app, "--chunk", options.chunk,
                       "Bytes per allocation, a multiple of 2M; a mipmap chunk is its base "
                       "level (the chain adds a third)")
      ->default_str("256M");
  app.add_option("--threads", options.threads,
                 "Threads allocating at once, each through a path of its own, racing for the "
                 "same --target; each round starts them together")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  app.add_option("--rounds", options.rounds,
                 "Times to allocate up to the target and free it all (0: until killed); "
                 "the report describes the first, and an event=looping line precedes the "
                 "second")
      ->capture_default_str();
  app.add_option("--hold", options.hold_seconds,
                 "Seconds to keep the memory before freeing it; an event=holding line is "
                 "printed when the wait starts")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("--retry", options.retry,
               "After freeing, allocate the same amount again and free it (retry_* keys)");
  app.add_flag("--info", options.info,
               "Report the driver, the device and its memory, and allocate nothing");
  add_driver_options(app, options.driver);

  if (std::optional<int> status = parse_command_line(app, argc, argv)) return *status;
  if (options.chunk == 0 || options.chunk % kAllocationUnit != 0 ||
      options.target % kAllocationUnit != 0) {
    report_error("--target and --chunk must be multiples of 2M, and --chunk not 0 (see --help)");
    return kExitUsage;
  }
  return run(options);
}
