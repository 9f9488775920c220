#include "allocation_round.h"

#include <algorithm>
#include <atomic>
#include <latch>
#include <thread>

#include "cu_check.h"

namespace workloads {
namespace {

uint64_t round_up(uint64_t value, uint64_t unit) {
  return (value + unit - 1) / unit * unit;
}

Round allocate_on_this_thread(AllocationPath& path, uint64_t target, uint64_t chunk) {
  Round round;
  while (round.bytes < target) {
    const uint64_t want = std::min(chunk, round_up(target - round.bytes, kAllocationUnit));
    uint64_t obtained = 0;
    round.error = path.allocate(want, obtained);
    if (round.error != CUDA_SUCCESS) break;
    round.bytes += obtained;
    ++round.chunks;
  }
  round.thread_bytes = {round.bytes};
  return round;
}

// The budget the threads share: a thread claims a chunk before allocating
// it, so that together they stop at the target as one thread would.
class SharedBudget {
 public:
  explicit SharedBudget(uint64_t target) : target_(target) {}

  // The size of the next chunk, claimed; 0 once the target is reached.
  uint64_t claim(uint64_t chunk) {
    uint64_t claimed = claimed_.load(std::memory_order_relaxed);
    uint64_t want = 0;
    do {
      if (claimed >= target_) return 0;
      want = std::min(chunk, round_up(target_ - claimed, kAllocationUnit));
    } while (!claimed_.compare_exchange_weak(claimed, claimed + want, std::memory_order_relaxed));
    return want;
  }
  // Settles a claim of `wanted` bytes that obtained `obtained` (0 on failure).
  void settle(uint64_t wanted, uint64_t obtained) {
    if (obtained >= wanted)
      claimed_.fetch_add(obtained - wanted, std::memory_order_relaxed);
    else
      claimed_.fetch_sub(wanted - obtained, std::memory_order_relaxed);
  }

 private:
  const uint64_t target_;
  std::atomic<uint64_t> claimed_{0};
};

// The error that describes the round: one the allocator did not expect if
// any thread met one, else running out if any thread ran out.
CUresult worst(CUresult a, CUresult b) {
  if (!is_expected(a)) return a;
  if (!is_expected(b)) return b;
  return a != CUDA_SUCCESS ? a : b;
}

Round allocate_on_threads(const std::vector<std::unique_ptr<AllocationPath>>& paths,
                          uint64_t target, uint64_t chunk, CUcontext context) {
  SharedBudget budget(target);
  std::vector<Round> rounds(paths.size());
  // Every thread is ready before any allocates, so that they race.
  std::latch start(static_cast<std::ptrdiff_t>(paths.size()));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < paths.size(); ++i) {
    threads.emplace_back([&, i] {
      Round& round = rounds[i];
      round.error = CU(cuCtxSetCurrent)(context);
      start.arrive_and_wait();
      if (round.error != CUDA_SUCCESS) {
        report_failed_call("cuCtxSetCurrent(context)", round.error, __FILE_NAME__, __LINE__);
        return;
      }
      while (const uint64_t want = budget.claim(chunk)) {
        uint64_t obtained = 0;
        round.error = paths[i]->allocate(want, obtained);
        if (round.error != CUDA_SUCCESS) {
          budget.settle(want, 0);
          break;
        }
        budget.settle(want, obtained);
        round.bytes += obtained;
        ++round.chunks;
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();

  Round all;
  for (const Round& round : rounds) {
    all.bytes += round.bytes;
    all.chunks += round.chunks;
    all.error = worst(all.error, round.error);
    all.thread_bytes.push_back(round.bytes);
  }
  return all;
}

}  // namespace

Round allocate_until(const std::vector<std::unique_ptr<AllocationPath>>& paths, uint64_t target,
                     uint64_t chunk, CUcontext context) {
  if (paths.size() == 1) return allocate_on_this_thread(*paths.front(), target, chunk);
  return allocate_on_threads(paths, target, chunk, context);
}

}  // namespace workloads
