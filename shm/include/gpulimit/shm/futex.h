// Futex wait and wake on a 32-bit word in a shared mapping: processes sleep
// on a word of a file they all map, with no daemon and no lock in between.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace gpulimit::shm {

// Sleeps while `word` holds `expected`, for at most `timeout`. Returns early
// on a wake, a signal or spuriously: callers look at the word again.
void futex_wait(const std::atomic<uint32_t>& word, uint32_t expected,
                std::chrono::nanoseconds timeout) noexcept;

// Sleeps while `word` holds `expected`, with no time limit. Returns on a
// wake, a signal or spuriously: callers look at the word again.
void futex_wait(const std::atomic<uint32_t>& word, uint32_t expected) noexcept;

// Wakes every thread, of any process, waiting on `word`.
void futex_wake_all(const std::atomic<uint32_t>& word) noexcept;

}  // namespace gpulimit::shm
