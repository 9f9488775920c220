// Compiled into gpulimit::shm_test_seams only.
#include "gpulimit/shm/test_seams.h"

#include <atomic>

namespace gpulimit::shm::test_seams {
namespace {

constinit std::atomic<Handler> installed{nullptr};

}  // namespace

void set_handler(Handler handler) noexcept {
  installed.store(handler, std::memory_order_release);
}

void reached(Point point) noexcept {
  if (const Handler handler = installed.load(std::memory_order_acquire)) handler(point);
}

}  // namespace gpulimit::shm::test_seams
