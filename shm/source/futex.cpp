#include "gpulimit/shm/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace gpulimit::shm {
namespace {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

// Not FUTEX_PRIVATE_FLAG: waiters and wakers are different processes, which
// the kernel matches by the mapped file's page rather than by address.
long futex(const std::atomic<uint32_t>& word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, const_cast<std::atomic<uint32_t>*>(&word), op, value, timeout, nullptr,
                 0);
}

}  // namespace

void futex_wait(const std::atomic<uint32_t>& word, uint32_t expected,
                std::chrono::nanoseconds timeout) noexcept {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const timespec relative{static_cast<time_t>(seconds.count()),
                          static_cast<long>((timeout - seconds).count())};
  futex(word, FUTEX_WAIT, expected, &relative);  // EAGAIN, EINTR, ETIMEDOUT: the caller re-checks
}

void futex_wait(const std::atomic<uint32_t>& word, uint32_t expected) noexcept {
  futex(word, FUTEX_WAIT, expected, nullptr);  // EAGAIN, EINTR: the caller re-checks
}

void futex_wake_all(const std::atomic<uint32_t>& word) noexcept {
  futex(word, FUTEX_WAKE, INT_MAX, nullptr);
}

}  // namespace gpulimit::shm
