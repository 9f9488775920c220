// What one attach to gpulimitd gives the process: the server's board, mapped
// read-only; the tenant's number on it; for each device the process sees
// (by CUDA ordinal), the board device that time-slices it; the connection;
// and the contexts the process launched into on each device, which the drain
// thread synchronises before it gives a device back.
//
// A session ends when its server goes; it is never freed: threads may still
// hold its token words (a stale view, a futex wait returning), and a board
// is a page. A process makes a new session per server it meets.
#pragma once

#include <cuda.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "gate/gate_connection.h"
#include "gpulimit/shm/board.h"
#include "gpulimit/shm/board_mapping.h"
#include "gpulimit/shm/lease_page.h"

namespace gpulimit::gate {

// Devices the process sees, in CUDA ordinal order: what Hello lists. Beyond
// kMaxDevices, devices are not time-sliced.
inline constexpr int kMaxDevices = static_cast<int>(shm::kBoardDevices);

class GateSession {
 public:
  // `hello` is what the process said; a device whose board entry does not
  // carry the UUID it named is not time-sliced.
  GateSession(JoinResult&& joined, const protocol::Hello& hello) noexcept;
  GateSession(const GateSession&) = delete;
  GateSession& operator=(const GateSession&) = delete;

  uint32_t held() const noexcept { return held_; }        // token_held(my tenant)
  uint32_t revoked() const noexcept { return revoked_; }  // token_revoked(my tenant)
  uint32_t quantum_us() const noexcept { return board_->layout().quantum_us; }
  GateConnection& connection() noexcept { return connection_; }

  // The board device that time-slices CUDA device `ordinal`, or null.
  const shm::BoardDevice* device(int ordinal) const noexcept {
    return ordinal >= 0 && ordinal < kMaxDevices ? devices_[static_cast<size_t>(ordinal)] : nullptr;
  }
  // Its index on the board, as messages name it.
  uint32_t board_index(int ordinal) const noexcept {
    return board_index_[static_cast<size_t>(ordinal)];
  }

  // The lease the tenant's reservations on CUDA device `ordinal` are held
  // to (lease_page.h), or null when no memory total binds them there.
  const shm::LeaseDevice* lease(int ordinal) const noexcept {
    return ordinal >= 0 && ordinal < kMaxDevices ? leases_[static_cast<size_t>(ordinal)] : nullptr;
  }
  // Asks the server for a lease of `need` bytes on `ordinal` and waits (a
  // few seconds at most) until it has answered past `answers_seen` (the
  // device's `answers`, read before the reservation that failed). False
  // when it could not ask or had no answer: the server is gone or stuck.
  bool ask_for_lease(int ordinal, uint64_t need, uint32_t answers_seen) noexcept;

  // The contexts the process launched into on `ordinal` (recorded on the
  // launch slow path).
  void record_context(int ordinal, CUcontext context) noexcept;
  std::vector<CUcontext> contexts(int ordinal) noexcept;
  void forget_context(int ordinal, CUcontext context) noexcept;

  // Sleeps until `word` no longer holds `seen`, a wake, or the session is
  // closed. With a timeout, at most that long.
  void wait(const std::atomic<uint32_t>& word, uint32_t seen) noexcept;
  void wait_for(const std::atomic<uint32_t>& word, uint32_t seen,
                std::chrono::nanoseconds timeout) noexcept;

  bool closed() const noexcept { return closed_.load(std::memory_order_seq_cst); }
  // The server is gone: every thread waiting in this session returns and
  // sees it closed. Returns once none is left waiting.
  void close() noexcept;

 private:
  std::unique_ptr<shm::BoardMapping> board_;
  std::unique_ptr<shm::LeasePage> lease_page_;
  GateConnection connection_;
  uint32_t held_;
  uint32_t revoked_;
  std::array<const shm::BoardDevice*, kMaxDevices> devices_{};
  std::array<uint32_t, kMaxDevices> board_index_{};
  std::array<const shm::LeaseDevice*, kMaxDevices> leases_{};

  std::mutex contexts_mu_;
  std::array<std::vector<CUcontext>, kMaxDevices> contexts_;

  // Threads inside wait(): close() wakes the token words until it is 0.
  std::atomic<uint32_t> waiters_{0};
  std::atomic<bool> closed_{false};
};

}  // namespace gpulimit::gate
