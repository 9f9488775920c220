// A tenant's lease page: what gpulimitd promises the tenant's processes
// they may reserve on each device under its group's and user's memory totals
// (`memory_total` in the policy), in an anonymous memory file the server
// writes and the processes map read-only (protocol Welcome hands it over).
// The protocol, checked by SPIN: limiter-server/model/README.md.
//
//   - `lease` is read by a reservation after its CAS on the ledger's `used`
//     (seq_cst, TenantLedger::reserve_within), and stored by the server
//     before it reads `used` again (seq_cst, LeaseBook::shrink), so that one
//     of the two always sees the other.
//   - `answers` counts the server's answers to LeaseRequests for the device,
//     granted or not: a futex word a process waits on after asking.
//   - `room` is the most the tenant could hold there as the server last
//     looked (its totals less what the others under them hold): what the
//     tenant's processes report as the device's free memory, less their own
//     use. A figure for cuMemGetInfo, not a promise.
//
// A process can raise neither word: a tenant that corrupts its own ledger
// can exceed only its own lease, never another tenant's or the total.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "gpulimit/shm/board.h"

namespace gpulimit::shm {

inline constexpr uint64_t kLeaseMagic = 0x454c'6d69'6c75'7067;  // "gpulimLE" in file order
// Raise with every change of LeaseLayout below.
inline constexpr uint32_t kLeaseLayoutVersion = 1;
// No total binds the device: the lease then.
inline constexpr uint64_t kNoLeaseLimit = UINT64_MAX;

struct alignas(64) LeaseDevice {
  std::atomic<uint64_t> lease;    // bytes the tenant may reserve there, all processes together
  std::atomic<uint32_t> answers;  // the server's answers so far, a futex word
  std::atomic<uint64_t> room;     // bytes the tenant could hold there now, its own included
};

struct LeaseHeader {
  uint64_t magic;  // written last when the page is built
  uint32_t layout_version;
  uint32_t layout_size;
  uint32_t tenant_number;  // the board's number of the tenant it is for
  uint32_t reserved;
};

struct LeaseLayout {
  LeaseHeader header;
  LeaseDevice devices[kBoardDevices];  // indexed by board device (board.h), as messages are
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::is_standard_layout_v<LeaseLayout>);

class LeasePage {
 public:
  // Server side: a new page for tenant `tenant_number`, every lease and
  // room kNoLeaseLimit, mapped read-write. nullptr with a one-line `error`.
  static std::unique_ptr<LeasePage> create(uint32_t tenant_number, std::string& error) noexcept;
  // Client side: maps `fd` (which the page then owns) read-only. nullptr,
  // with a one-line `error`, when it is not a lease page of this layout; `fd`
  // stays open then, the caller's to close.
  static std::unique_ptr<LeasePage> map_read_only(int fd, std::string& error) noexcept;

  LeasePage(const LeasePage&) = delete;
  LeasePage& operator=(const LeasePage&) = delete;
  ~LeasePage();

  const LeaseLayout& layout() const noexcept { return *layout_; }
  const LeaseDevice& device(uint32_t board_device) const noexcept {
    return layout_->devices[board_device];
  }

  // Server side only.
  void set_lease(uint32_t board_device, uint64_t bytes) noexcept;
  void set_room(uint32_t board_device, uint64_t bytes) noexcept;
  // Counts an answer to a request for the device and wakes the processes
  // that wait for one.
  void answer(uint32_t board_device) noexcept;
  // A new read-only descriptor of the page, for a client (the caller
  // closes it). -1 on failure.
  int read_only_descriptor() const noexcept;

 private:
  LeasePage(int fd, LeaseLayout* layout, bool writable) noexcept
      : fd_(fd), layout_(layout), writable_(writable) {}

  int fd_;
  LeaseLayout* layout_;
  bool writable_;
};

}  // namespace gpulimit::shm
