#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>

#include "gpulimit/cupti_trace/clock_calibration.h"

namespace gpulimit::cupti_trace {
namespace {

// CLOCK_REALTIME-like CUPTI stamps against a monotonic clock started at boot.
constexpr uint64_t kRealtime = 1'780'000'000'000'000'000ull;
constexpr uint64_t kMonotonic = 50'000'000'000ull;

TEST(ClockOffset, TakesTheMidpointOfTheNarrowestBracket) {
  // Arrange: the second sample was preempted (a wide bracket)
  const std::array<ClockSample, 3> samples{{
      {kMonotonic, kRealtime, kMonotonic + 400},
      {kMonotonic + 1'000, kRealtime + 900, kMonotonic + 901'000},
      {kMonotonic + 2'000, kRealtime + 2'050, kMonotonic + 2'100},
  }};

  // Act
  const std::optional<ClockOffset> sut = ClockOffset::from_samples(samples);

  // Assert: the third: CUPTI's 2'050 was monotonic's 2'050 +- 50
  ASSERT_TRUE(sut);
  EXPECT_EQ(sut->offset_ns(),
            static_cast<int64_t>(kMonotonic + 2'050) - static_cast<int64_t>(kRealtime + 2'050));
  EXPECT_EQ(sut->uncertainty_ns(), 50u);
  EXPECT_EQ(sut->to_monotonic(kRealtime + 1'000'000), kMonotonic + 1'000'000);
}

TEST(ClockOffset, WorksWhenCuptiIsBehindMonotonic) {
  // Arrange: a CUPTI clock that started later than CLOCK_MONOTONIC
  const std::array<ClockSample, 1> samples{{{kMonotonic, 1'000, kMonotonic + 10}}};

  // Act
  const std::optional<ClockOffset> sut = ClockOffset::from_samples(samples);

  // Assert
  ASSERT_TRUE(sut);
  EXPECT_EQ(sut->offset_ns(), static_cast<int64_t>(kMonotonic + 5 - 1'000));
  EXPECT_EQ(sut->to_monotonic(2'000), kMonotonic + 1'005);
}

TEST(ClockOffset, RejectsBracketsThatEndBeforeTheyBegin) {
  // Arrange
  const std::array<ClockSample, 1> samples{{{kMonotonic + 10, kRealtime, kMonotonic}}};

  // Act, Assert
  EXPECT_FALSE(ClockOffset::from_samples(samples));
}

TEST(ClockOffset, RejectsNoSamples) {
  EXPECT_FALSE(ClockOffset::from_samples({}));
}

TEST(ClockOffset, IgnoresAGarbageSampleBesideAGoodOne) {
  // Arrange: a CUPTI stamp beyond int64 in a zero-width bracket
  const std::array<ClockSample, 2> samples{{
      {kMonotonic, UINT64_MAX, kMonotonic},
      {kMonotonic, kRealtime, kMonotonic + 2},
  }};

  // Act
  const std::optional<ClockOffset> sut = ClockOffset::from_samples(samples);

  // Assert
  ASSERT_TRUE(sut);
  EXPECT_EQ(sut->offset_ns(),
            static_cast<int64_t>(kMonotonic + 1) - static_cast<int64_t>(kRealtime));
}

TEST(ClockOffset, IdentityChangesNothing) {
  // Arrange
  const ClockOffset sut = ClockOffset::identity();

  // Act, Assert
  EXPECT_EQ(sut.offset_ns(), 0);
  EXPECT_EQ(sut.uncertainty_ns(), 0u);
  EXPECT_EQ(sut.to_monotonic(kMonotonic), kMonotonic);
}

TEST(ClockOffset, RefusesTimesBeforeTheMonotonicZero) {
  // Arrange
  const std::array<ClockSample, 1> samples{{{kMonotonic, kRealtime, kMonotonic}}};
  const std::optional<ClockOffset> sut = ClockOffset::from_samples(samples);
  ASSERT_TRUE(sut);

  // Act, Assert: a stamp from long before boot
  EXPECT_FALSE(sut->to_monotonic(kRealtime - kMonotonic - 1));
  EXPECT_EQ(sut->to_monotonic(kRealtime - kMonotonic), 0u);
}

TEST(ClockOffset, RefusesTimesBeyondSixtyFourBits) {
  // Arrange: CUPTI far behind, so the offset is large and positive
  const std::array<ClockSample, 1> samples{{{kRealtime, 0, kRealtime}}};
  const std::optional<ClockOffset> sut = ClockOffset::from_samples(samples);
  ASSERT_TRUE(sut);

  // Act, Assert
  EXPECT_FALSE(sut->to_monotonic(static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
  EXPECT_FALSE(sut->to_monotonic(UINT64_MAX));
}

}  // namespace
}  // namespace gpulimit::cupti_trace
