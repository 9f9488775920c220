#include "gate/gate_session.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "gpulimit/shm/futex.h"

namespace gpulimit::gate {

GateSession::GateSession(JoinResult&& joined, const protocol::Hello& hello) noexcept
    : board_(std::move(joined.board)),
      lease_page_(std::move(joined.leases)),
      connection_(joined.socket),
      held_(shm::token_held(joined.welcome.tenant_number)),
      revoked_(shm::token_revoked(joined.welcome.tenant_number)) {
  const shm::BoardLayout& layout = board_->layout();
  // Devices the server has published; each one's UUID was fixed before.
  const uint32_t published =
      std::min(layout.device_count.load(std::memory_order_acquire), shm::kBoardDevices);
  const int count = static_cast<int>(std::min(hello.device_count, shm::kBoardDevices));
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    const uint32_t index = joined.welcome.board_device[ordinal];
    // A device the server does not time-slice.
    if (index >= published ||
        std::memcmp(layout.devices[index].uuid, hello.uuids[ordinal], sizeof hello.uuids[0]) != 0)
      continue;
    devices_[static_cast<size_t>(ordinal)] = &layout.devices[index];
    board_index_[static_cast<size_t>(ordinal)] = index;
    if (lease_page_ && (joined.welcome.leased_devices >> ordinal & 1u))
      leases_[static_cast<size_t>(ordinal)] = &lease_page_->device(index);
  }
}

bool GateSession::ask_for_lease(int ordinal, uint64_t need, uint32_t answers_seen) noexcept {
  const shm::LeaseDevice* leased = lease(ordinal);
  if (!leased || !connection_.send_lease_request(board_index(ordinal), need)) return false;
  // The server answers at once unless it is stuck; a bound keeps a stuck
  // one from hanging the allocation (it then fails as out of memory).
  constexpr auto kPatience = std::chrono::seconds(5);
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  for (;;) {
    const uint32_t answers = leased->answers.load(std::memory_order_seq_cst);
    if (answers != answers_seen) return true;
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero() || closed()) return false;
    wait_for(leased->answers, answers, left);
  }
}

void GateSession::record_context(int ordinal, CUcontext context) noexcept {
  if (!device(ordinal) || !context) return;
  std::lock_guard<std::mutex> guard(contexts_mu_);
  std::vector<CUcontext>& known = contexts_[static_cast<size_t>(ordinal)];
  if (std::find(known.begin(), known.end(), context) != known.end()) return;
  try {
    known.push_back(context);
  } catch (...) {
    // Out of memory: the context's work is not drained at a revoke, so the
    // server may see this process's kernels run into the next tenant's time.
  }
}

std::vector<CUcontext> GateSession::contexts(int ordinal) noexcept {
  std::lock_guard<std::mutex> guard(contexts_mu_);
  try {
    return contexts_[static_cast<size_t>(ordinal)];
  } catch (...) {
    return {};
  }
}

void GateSession::forget_context(int ordinal, CUcontext context) noexcept {
  std::lock_guard<std::mutex> guard(contexts_mu_);
  std::vector<CUcontext>& known = contexts_[static_cast<size_t>(ordinal)];
  known.erase(std::remove(known.begin(), known.end(), context), known.end());
}

void GateSession::wait(const std::atomic<uint32_t>& word, uint32_t seen) noexcept {
  // Dekker with close(): either close() sees this waiter counted and wakes
  // until it has left, or this waiter sees the session closed and does not
  // sleep. A plain futex wait could miss close()'s wake: the word itself
  // never changes once the server is gone.
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  if (!closed_.load(std::memory_order_seq_cst)) shm::futex_wait(word, seen);
  waiters_.fetch_sub(1, std::memory_order_seq_cst);
}

void GateSession::wait_for(const std::atomic<uint32_t>& word, uint32_t seen,
                           std::chrono::nanoseconds timeout) noexcept {
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  if (!closed_.load(std::memory_order_seq_cst)) shm::futex_wait(word, seen, timeout);
  waiters_.fetch_sub(1, std::memory_order_seq_cst);
}

void GateSession::close() noexcept {
  closed_.store(true, std::memory_order_seq_cst);
  // A waiter counted before the store may be between its check and its
  // futex call: wake again until every counted waiter has gone. It is
  // runnable, so this ends within a scheduling round.
  for (;;) {
    for (const shm::BoardDevice* device : devices_)
      if (device) shm::futex_wake_all(device->token);
    for (const shm::LeaseDevice* leased : leases_)
      if (leased) shm::futex_wake_all(leased->answers);
    if (waiters_.load(std::memory_order_seq_cst) == 0) break;
    sched_yield();
  }
}

}  // namespace gpulimit::gate
