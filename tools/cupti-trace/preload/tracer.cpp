// libgpulimit-cupti-trace.so: preloaded into a process, it records every
// kernel the process runs with CUPTI's concurrent-kernel activity records and
// appends them to $GPULIMIT_CUPTI_TRACE_FILE in gpulimit's trace format. See
// README.md beside this directory.
//
// Everything happens in a constructor, before main, so that CUPTI is set up
// before the program's first CUDA call, and at exit.
#include <cupti_activity.h>
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "activity_buffers.h"
#include "diagnostics.h"
#include "gpulimit/cupti_trace/clock_calibration.h"
#include "trace_file.h"

namespace gpulimit::cupti_trace {
namespace {

constexpr const char* kFileVariable = "GPULIMIT_CUPTI_TRACE_FILE";
constexpr const char* kFlushVariable = "GPULIMIT_CUPTI_TRACE_FLUSH_MS";
constexpr unsigned kDefaultFlushMs = 1000;
// A timestamp callback that CUPTI honours leaves cuptiGetTimestamp on
// CLOCK_MONOTONIC; further off than this, it did not take.
constexpr int64_t kCallbackTolerance_ns = 1'000'000;

TraceFile trace_file;

uint64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

uint64_t monotonic_timestamp() {
  return monotonic_ns();
}

std::optional<ClockOffset> calibrate() {
  std::array<ClockSample, kCalibrationSamples> samples{};
  for (ClockSample& sample : samples) {
    sample.monotonic_before_ns = monotonic_ns();
    if (cuptiGetTimestamp(&sample.cupti_ns) != CUPTI_SUCCESS) return std::nullopt;
    sample.monotonic_after_ns = monotonic_ns();
  }
  return ClockOffset::from_samples(samples);
}

// CUPTI on CLOCK_MONOTONIC when it takes a timestamp callback (checked:
// then the offset is zero, and the trace is exact); otherwise the measured
// offset from CUPTI's own clock.
std::optional<ClockOffset> choose_clock() {
  // Looked up by name: CUPTI of early CUDA 12 releases lacks it (the tracer
  // then calibrates), and so may their headers.
  using RegisterTimestampCallback = CUptiResult (*)(uint64_t(*)());
  const auto register_callback = reinterpret_cast<RegisterTimestampCallback>(
      dlsym(RTLD_DEFAULT, "cuptiActivityRegisterTimestampCallback"));
  const bool callback =
      register_callback && register_callback(monotonic_timestamp) == CUPTI_SUCCESS;
  const std::optional<ClockOffset> measured = calibrate();
  if (!measured) {
    say("cannot read CUPTI's clock (cuptiGetTimestamp); not tracing");
    return std::nullopt;
  }
  if (!callback) return measured;
  if (std::llabs(measured->offset_ns()) <= kCallbackTolerance_ns) return ClockOffset::identity();
  say("CUPTI took the timestamp callback but its clock is %lld ns off CLOCK_MONOTONIC; "
      "correcting by that",
      static_cast<long long>(measured->offset_ns()));
  return measured;
}

// Flushes completed buffers now and then, so that the trace of a running
// process grows as it runs and a killed process loses at most one period.
// Stops for good once the process exits.
std::mutex flush_mu;
bool exiting = false;

void flush_periodically(unsigned period_ms) {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(period_ms));
    std::lock_guard lock(flush_mu);
    if (exiting) return;
    cuptiActivityFlushAll(0);
  }
}

unsigned flush_period_ms() {
  const char* text = std::getenv(kFlushVariable);
  if (!text || !*text) return kDefaultFlushMs;
  char* end = nullptr;
  errno = 0;
  const unsigned long value = std::strtoul(text, &end, 10);
  if (errno != 0 || *end != '\0' || text[0] == '-' || value > 3'600'000) {
    say("%s=%s is not a number of milliseconds up to 3600000; using %u", kFlushVariable, text,
        kDefaultFlushMs);
    return kDefaultFlushMs;
  }
  return static_cast<unsigned>(value);
}

// The periodic flush runs only in the process that started it: a forked
// child has no such thread and writes its kernels when it exits. Locks are
// taken in the order the flush takes them (flush, then buffers).
void before_fork() {
  flush_mu.lock();
  lock_buffers_for_fork();
}
void after_fork_in_parent() {
  unlock_buffers_after_fork();
  flush_mu.unlock();
}
void after_fork_in_child() {
  unlock_buffers_in_child(monotonic_ns());
  flush_mu.unlock();
}

void flush_at_exit() {
  {
    std::lock_guard lock(flush_mu);
    exiting = true;
  }
  // Forced: buffers with records still incomplete come back too (their
  // kernels, unfinished, have no end time and are counted as lost).
  cupti_ok(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  report_losses();
}

__attribute__((constructor)) void start_tracing() {
  const char* path = std::getenv(kFileVariable);
  if (!path || !*path) {
    say("%s is not set; not tracing (run programs with gpulimit-cupti-trace -o FILE -- ...)",
        kFileVariable);
    return;
  }
  const unsigned period_ms = flush_period_ms();
  if (!trace_file.open(path)) return;
  const std::optional<ClockOffset> clock = choose_clock();
  if (!clock) return;
  configure_buffers(&trace_file, *clock);
  if (!cupti_ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                "cuptiActivityRegisterCallbacks"))
    return;
  // Device records carry the UUIDs that give physical indices; without them
  // devices are written as CUPTI numbers them (said once per device).
  cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE), "cuptiActivityEnable(DEVICE)");
  if (!cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
                "cuptiActivityEnable(CONCURRENT_KERNEL)"))
    return;
  std::atexit(flush_at_exit);
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
  if (period_ms > 0) std::thread(flush_periodically, period_ms).detach();
}

}  // namespace
}  // namespace gpulimit::cupti_trace
