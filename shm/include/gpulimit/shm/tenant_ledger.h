// The tenant memory ledger: one small file per tenant, mapped by every
// process of the tenant, that keeps the tenant's device memory under a hard
// cap. Several processes racing for the last bytes never exceed the cap
// together, and a process that dies at any instant gives back exactly what it
// held. The protocol and its invariants: source/tenant_ledger.cpp.
//
// Built to live inside someone else's process: nothing here throws, prints,
// installs signal handlers or exits, and reserve/release never allocate and
// make no system call unless they meet a recount or a reserve finds no room.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpulimit::shm {

inline constexpr uint32_t kMaxDevices = 16;
inline constexpr uint32_t kMaxProcesses = 256;

struct LedgerLayout;
struct LedgerAccess;

// A taken process slot, as status tools and tests see it.
struct ProcessHolding {
  int32_t pid = 0;
  bool live = false;  // false: the process died and no reaper has cleared the slot yet
  std::array<uint64_t, kMaxDevices> held{};
};

class TenantLedger {
 public:
  // `<dir>/gpulimit-<uid>-<tenant>.ledger`. A tenant id is 1 to 64 letters,
  // digits, '.', '_' or '-'.
  static std::string path_for(const std::string& dir, uid_t uid, const std::string& tenant);

  // Opens the tenant's ledger in `dir` (created if absent) and attaches this
  // process to it. A ledger no process is attached to is rebuilt, so a new job
  // starts from fresh caps. nullptr, with a one-line `error` naming the file,
  // when it cannot be used: another layout version or a damaged file that
  // running processes still use, a file owned by another user, every process
  // slot taken by a live process.
  static std::unique_ptr<TenantLedger> open(const std::string& dir, const std::string& tenant,
                                            std::string& error) noexcept;

  // Ledger files in `dir` of user `uid` that no live process is attached to
  // (full paths, sorted), for the CLI to sweep with remove_if_stale.
  static std::vector<std::string> stale_ledgers(const std::string& dir, uid_t uid) noexcept;
  // Removes the ledger at `path` if no process is attached to it or opening
  // it, checked under the lock openers take. A plain unlink could remove a
  // file a process is opening, which would then count its memory apart from
  // the rest of its tenant.
  static bool remove_if_stale(const std::string& path) noexcept;

  TenantLedger(const TenantLedger&) = delete;
  TenantLedger& operator=(const TenantLedger&) = delete;
  // Detaches if still attached. No thread may be inside a call on this object.
  ~TenantLedger();

  // Index of the device with this 16-byte UUID, registering it with
  // `cap_if_new` bytes if no process of the tenant has yet. Devices are keyed
  // by UUID because processes of one tenant may number them differently
  // (CUDA_VISIBLE_DEVICES). -1 when the table is full or not attached.
  int device(const unsigned char uuid[16], uint64_t cap_if_new) noexcept;
  uint32_t device_count() const noexcept;
  uint64_t cap(int dev) const noexcept;
  uint64_t used(int dev) const noexcept;  // the whole tenant's bytes
  uint64_t held(int dev) const noexcept;  // this process's bytes

  // Takes `bytes` of device `dev` for this process; false, with nothing
  // taken, when they would pass the cap (after reaping dead processes, if
  // there are any) or when not attached.
  bool reserve(int dev, uint64_t bytes) noexcept;
  // The same within a lease as well (lease_page.h): the tenant's `used`
  // after the reservation must not pass `lease`, read after the CAS that
  // took the bytes. kOverLease, with nothing taken and `*need` set to the
  // tenant's use the reservation would have made, when it would: the
  // server may grant a larger lease. A reap cannot help there, so none is
  // tried.
  enum class Reservation { kTaken, kOverCap, kOverLease };
  Reservation reserve_within(int dev, uint64_t bytes, const std::atomic<uint64_t>& lease,
                             uint64_t* need) noexcept;
  // Gives back `bytes` this process reserved on `dev`.
  void release(int dev, uint64_t bytes) noexcept;

  // Recounts the tenant's usage from the live processes' holdings, dropping
  // dead processes. False when it gave up because a live process stayed in
  // the middle of reserve/release past the bound (stopped, say): nothing
  // changed then, and a later call can try again.
  bool reap() noexcept;

  // The taken slots, live or dead. Allocates: for status tools and tests.
  std::vector<ProcessHolding> processes() const;

  // At process exit: gives back this process's bytes and frees its slot.
  // reserve() fails and release() does nothing afterwards.
  void detach() noexcept;

  // For a pthread_atfork child handler, so async-signal-safe: the child
  // shares the parent's open file description (and with it the parent's
  // liveness lock) and mapping. Drops both without touching the parent's
  // slot; the child is then detached, and attach() makes it a new process of
  // the tenant.
  void after_fork_in_child() noexcept;

  // Attaches afresh after after_fork_in_child() or detach(). Device indices
  // should be looked up again with device(): the file may have been rebuilt.
  bool attach(std::string& error) noexcept;
  bool attached() const noexcept { return attached_.load(std::memory_order_relaxed); }

  const std::string& path() const noexcept { return path_; }

 private:
  explicit TenantLedger(std::string path) : path_(std::move(path)) {}

  bool attach_or_throw(std::string& error);
  Reservation take(int dev, uint64_t bytes, const std::atomic<uint64_t>* lease,
                   uint64_t* need) noexcept;
  void unmap() noexcept;
  LedgerAccess access() const noexcept;
  bool valid_device(int dev) const noexcept;
  void reap_if_dead_slots() noexcept;

  std::string path_;
  int fd_ = -1;
  LedgerLayout* layout_ = nullptr;
  int slot_ = -1;
  // Tells this process's threads whether they may use the slot. Checked again
  // after raising the in-flight count, so detach() can wait out the threads
  // that got past the first check.
  std::atomic<bool> attached_{false};
};

}  // namespace gpulimit::shm
