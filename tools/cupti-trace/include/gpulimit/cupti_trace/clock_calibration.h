// From CUPTI's clock to CLOCK_MONOTONIC, the clock of gpulimit's traces.
//
// CUPTI stamps activity records on its own clock (CLOCK_REALTIME on Linux
// unless a timestamp callback replaces it), which jumps with NTP and differs
// from CLOCK_MONOTONIC by an offset. The offset is measured once, at start:
// a CUPTI timestamp read between two CLOCK_MONOTONIC reads lies, on the
// monotonic clock, somewhere in that bracket. Of several such samples the
// narrowest bracket is the best one (the others were preempted or
// interrupted), and its midpoint is off by at most half its width.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace gpulimit::cupti_trace {

struct ClockSample {
  uint64_t monotonic_before_ns = 0;
  uint64_t cupti_ns = 0;
  uint64_t monotonic_after_ns = 0;
};

// How many samples a calibration takes: enough that one of them is very
// likely not to be preempted on a loaded machine, and still microseconds.
inline constexpr std::size_t kCalibrationSamples = 16;

class ClockOffset {
 public:
  // CUPTI already stamps with CLOCK_MONOTONIC (a timestamp callback took).
  static ClockOffset identity() { return ClockOffset(0, 0); }
  // The offset from the narrowest sample; none when no sample is usable
  // (a bracket that ends before it begins).
  static std::optional<ClockOffset> from_samples(std::span<const ClockSample> samples);

  // `cupti_ns` on CLOCK_MONOTONIC; none when that is before the clock's
  // zero or beyond 64 bits (a record with a garbage timestamp).
  std::optional<uint64_t> to_monotonic(uint64_t cupti_ns) const;

  // monotonic = cupti + offset_ns().
  int64_t offset_ns() const { return offset_ns_; }
  // At most how far offset_ns() may be from the true offset.
  uint64_t uncertainty_ns() const { return uncertainty_ns_; }

 private:
  ClockOffset(int64_t offset_ns, uint64_t uncertainty_ns)
      : offset_ns_(offset_ns), uncertainty_ns_(uncertainty_ns) {}

  int64_t offset_ns_;
  uint64_t uncertainty_ns_;
};

}  // namespace gpulimit::cupti_trace
