#include "gpulimit/cupti_trace/clock_calibration.h"

#include <limits>

namespace gpulimit::cupti_trace {
namespace {

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

}  // namespace

std::optional<ClockOffset> ClockOffset::from_samples(std::span<const ClockSample> samples) {
  const ClockSample* best = nullptr;
  for (const ClockSample& sample : samples) {
    if (sample.monotonic_after_ns < sample.monotonic_before_ns) continue;
    // Both clocks count nanoseconds since an epoch in this century, so they
    // fit in int64 and their difference does too; anything else is garbage.
    if (sample.monotonic_after_ns > kInt64Max || sample.cupti_ns > kInt64Max) continue;
    if (!best || sample.monotonic_after_ns - sample.monotonic_before_ns <
                     best->monotonic_after_ns - best->monotonic_before_ns)
      best = &sample;
  }
  if (!best) return std::nullopt;
  const uint64_t width = best->monotonic_after_ns - best->monotonic_before_ns;
  const uint64_t midpoint = best->monotonic_before_ns + width / 2;
  return ClockOffset(static_cast<int64_t>(midpoint) - static_cast<int64_t>(best->cupti_ns),
                     width - width / 2);
}

std::optional<uint64_t> ClockOffset::to_monotonic(uint64_t cupti_ns) const {
  if (cupti_ns > kInt64Max) return std::nullopt;
  // Two int64 can only overflow when both are positive; a negative sum is
  // a time before the monotonic clock's zero.
  const int64_t cupti = static_cast<int64_t>(cupti_ns);
  if (offset_ns_ > 0 && cupti > std::numeric_limits<int64_t>::max() - offset_ns_)
    return std::nullopt;
  const int64_t monotonic = cupti + offset_ns_;
  if (monotonic < 0) return std::nullopt;
  return static_cast<uint64_t>(monotonic);
}

}  // namespace gpulimit::cupti_trace
