// The tenant memory ledger.
//
// Words (ledger_layout.h), per tenant:
//   used[d]       the tenant's bytes on device d. The cap is checked on this
//                 word alone, by one compare-and-swap.
//   held[p][d]    the bytes process slot p holds on device d; written only by
//                 p's threads (and by reapers once p is dead).
//   inflight[p]   p's threads inside reserve/release.
//   recount_seq   odd while a reaper recounts; a futex word.
//   reaper_mutex  robust, process-shared: recounts, attach, detach and device
//                 registration. Never taken by reserve/release.
//   liveness      an OFD lock on a byte of the file, one per slot, held by
//                 p's open file description; the kernel drops it when p
//                 dies (liveness_lock.h).
//
// Reserve (the hot path; release is alike, subtracting from held and used,
// with no cap to check):
//   R1  inflight[p] += 1                                  seq_cst
//   R2  if recount_seq is odd: inflight[p] -= 1, wait until it changes, retry
//   R3  held[p][d] += n
//   R4  CAS used[d] → used[d] + n, unless that passes the cap;
//       if it would: held[p][d] -= n, and the reserve fails (after one reap
//       and retry, a failure adds 1 to oom_denials[d], a statistic only)
//       within a lease (reserve_within): after the CAS, read the lease
//       (seq_cst); past it, used[d] -= n and held[p][d] -= n, and the
//       reserve fails with nothing taken (the lease protocol's L4-L6,
//       limiter-server/model/README.md)
//   R5  inflight[p] -= 1                                  release
//
// Recount, by a reaper holding reaper_mutex (reaper.cpp). Reapers are whoever
// notices a dead slot: attach, a reserve that fails for lack of room, reap().
//   C1  recount_seq += 1, now odd                         seq_cst
//   C2  judge each taken slot live or dead by its liveness lock
//   C3  wait until every live slot's inflight is 0. A slot whose process dies
//       meanwhile turns dead. A live slot still in flight after 100 ms (a
//       stopped process) abandons the recount: straight to C6, nothing changed
//   C4  used[d] = Σ held[p][d] over the live slots p
//   C5  clear the dead slots
//   C6  recount_seq += 1, now even (release); wake its waiters
//
// Invariants:
//   I1  Committed bytes. Call a reservation committed once its R4 succeeded,
//       a release once its R4 ran. Outside R3..R4, held[p][d] is p's
//       committed reservations less its releases, and used[d] is that sum
//       over every slot, dead or alive.
//   I2  The cap. used[d] <= cap[d] at every instant: R4 raises used only by a
//       CAS that checks the cap, releases lower it, and C4 lowers it too (it
//       drops the dead processes' shares from the sum of I1). So processes
//       racing for the last bytes never exceed the cap together.
//   I3  Exact recounts. R1-R2 and C1-C3 are a store then a load on each side,
//       all seq_cst, so at least one side sees the other: either the reserver
//       sees the odd sequence and backs off before R3, or the reaper sees its
//       inflight count and waits for its R5. Once C3 ends no live process is
//       between R3 and R5, each live held is exactly what I1 says, and C4
//       makes used[d] the exact sum over the live processes. A dead process's
//       held is dropped whole, whatever step it died at: a half-done R3 or R4
//       leaves no trace.
//   I4  Progress. Nothing waits inside R1..R5, so C3 ends within its bound. A
//       reaper killed mid-recount leaves the sequence odd and its mutex owned
//       by a dead thread. Reservers waiting on the odd sequence try the mutex
//       after every 10 ms; EOWNERDEAD gives it to one of them. Whoever takes
//       the mutex finishes an odd sequence's recount first (ReaperLock), so
//       the sequence is odd only while its mutex holder recounts or after
//       that holder died. (A reaper *stopped* mid-recount does make the
//       tenant's reservers wait until it is continued.)
//   I5  Slots. A slot is taken (pid != 0) by attach and freed by detach or
//       C5, all under reaper_mutex, so slots neither come nor go during a
//       recount, and a slot judged dead at C2 stays dead.
//
// Devices are published by storing device_count (release) after the entry
// is written, under reaper_mutex; an entry is never moved or removed while
// the file lives, so an index stays valid.

#include "gpulimit/shm/tenant_ledger.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "ledger_file.h"
#include "ledger_layout.h"
#include "liveness_lock.h"
#include "reaper.h"
#include "test_seam.h"

namespace gpulimit::shm {
namespace {

constexpr size_t kMaxTenantLength = 64;
constexpr std::string_view kLedgerSuffix = ".ledger";

bool valid_tenant(std::string_view tenant) {
  return !tenant.empty() && tenant.size() <= kMaxTenantLength &&
         std::all_of(tenant.begin(), tenant.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
         });
}

// Short enough for the string's inline buffer: assigning it cannot throw.
void note_out_of_memory(std::string& error) noexcept {
  error = "out of memory";
}

// R1-R2, waiting out recounts. False when the process detached meanwhile.
bool enter_hot_path(const std::atomic<bool>& attached, const LedgerAccess& access,
                    ProcessSlot& me) {
  for (;;) {
    me.inflight.fetch_add(1, std::memory_order_seq_cst);
    // Checked again now that the count is raised: detach() stores false and
    // then reads the count, so either we see false or it sees us (as C1-C3).
    if (!attached.load(std::memory_order_seq_cst)) {
      me.inflight.fetch_sub(1, std::memory_order_release);
      return false;
    }
    const uint32_t seq = access.layout->recount_seq.load(std::memory_order_seq_cst);
    if (seq % 2 == 0) return true;
    me.inflight.fetch_sub(1, std::memory_order_release);
    wait_for_recount(access, seq);
  }
}

// R4. Relaxed is enough: used is published to a recount by R5 (release) and
// back from it by C6 (release) and R2 (seq_cst load).
// R4, and with a lease L4-L6 (limiter-server/model/README.md): the CAS,
// then the lease read after it, both seq_cst, against the server's store of
// a lower lease followed by its read of `used`: one side sees the other.
TenantLedger::Reservation take_under_cap(DeviceEntry& device, uint64_t bytes,
                                         const std::atomic<uint64_t>* lease, uint64_t* need) {
  const uint64_t cap = device.cap;
  uint64_t used = device.used.load(std::memory_order_relaxed);
  do {
    if (used > cap || bytes > cap - used) return TenantLedger::Reservation::kOverCap;
  } while (!device.used.compare_exchange_weak(used, used + bytes, std::memory_order_seq_cst,
                                              std::memory_order_relaxed));
  if (!lease) return TenantLedger::Reservation::kTaken;
  GPULIMIT_SHM_SEAM(kLeaseCheck);
  if (used + bytes <= lease->load(std::memory_order_seq_cst))
    return TenantLedger::Reservation::kTaken;
  device.used.fetch_sub(bytes, std::memory_order_relaxed);  // L6
  *need = used + bytes;
  return TenantLedger::Reservation::kOverLease;
}

int find_device(const LedgerLayout& layout, const unsigned char uuid[16]) {
  const uint32_t count = published_devices(layout);
  for (uint32_t d = 0; d < count; ++d)
    if (std::memcmp(layout.devices[d].uuid, uuid, sizeof layout.devices[d].uuid) == 0)
      return static_cast<int>(d);
  return -1;
}

// Takes a free slot for the calling process; -1 when every slot holds a live
// process. Reaps first if some slot's process died.
int take_slot(const LedgerAccess& access) {
  const ReaperLock lock(access, ReaperLock::Mode::kWait);
  if (!lock.held()) return -1;
  if (has_dead_slot(access)) recount(access);
  LedgerLayout& layout = *access.layout;
  for (uint32_t i = 0; i < kMaxProcesses; ++i) {
    ProcessSlot& slot = layout.slots[i];
    if (slot.pid.load(std::memory_order_relaxed) != 0 || !liveness::take(access.fd, i)) continue;
    // inflight is left alone: a free slot's is 0, but for a thread of a
    // detached process that raced past its check and is about to undo its +1.
    for (auto& held : slot.held)
      held.store(0, std::memory_order_relaxed);
    slot.pid.store(getpid(), std::memory_order_release);
    if (i + 1 > slots_ever_taken(layout))
      layout.slot_high_water.store(i + 1, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

std::string TenantLedger::path_for(const std::string& dir, uid_t uid, const std::string& tenant) {
  return dir + "/gpulimit-" + std::to_string(uid) + "-" + tenant + std::string(kLedgerSuffix);
}

std::unique_ptr<TenantLedger> TenantLedger::open(const std::string& dir, const std::string& tenant,
                                                 std::string& error) noexcept {
  try {
    if (!valid_tenant(tenant)) {
      std::string shown = tenant.substr(0, kMaxTenantLength);
      const auto breaks_line = [](char c) { return c == '\n' || c == '\r'; };
      std::replace_if(shown.begin(), shown.end(), breaks_line, '?');  // one line, always
      error = "tenant id '" + shown + "' is not 1 to 64 letters, digits, '.', '_' or '-'";
      return nullptr;
    }
    std::unique_ptr<TenantLedger> ledger(new TenantLedger(path_for(dir, geteuid(), tenant)));
    if (!ledger->attach_or_throw(error)) return nullptr;
    return ledger;
  } catch (...) {  // std::bad_alloc, from building strings
    note_out_of_memory(error);
    return nullptr;
  }
}

TenantLedger::~TenantLedger() {
  detach();
  unmap();
}

bool TenantLedger::attach(std::string& error) noexcept {
  try {
    return attach_or_throw(error);
  } catch (...) {
    note_out_of_memory(error);
    return false;
  }
}

bool TenantLedger::attach_or_throw(std::string& error) {
  if (attached()) return true;
  unmap();  // what detach() left
  LockedLedgerFile file(path_, error);
  if (file.fd() < 0) return false;
  LedgerLayout* layout = file.map(path_, error);
  if (!layout) return false;
  const int slot = take_slot(LedgerAccess{layout, file.fd(), -1});
  if (slot < 0) {
    unmap_layout(layout);
    error = path_ + ": all " + std::to_string(kMaxProcesses) +
            " process slots are taken by live processes";
    return false;
  }
  // The creation lock is held until the slot is taken: a file with nobody
  // attached is rebuilt by the next opener, so it must not look that way
  // while we attach.
  fd_ = file.release();
  layout_ = layout;
  slot_ = slot;
  attached_.store(true, std::memory_order_release);
  return true;
}

void TenantLedger::detach() noexcept {
  if (!attached()) return;
  LedgerLayout& layout = *layout_;
  ProcessSlot& me = layout.slots[slot_];
  const ReaperLock lock(access(), ReaperLock::Mode::kWait);
  attached_.store(false, std::memory_order_seq_cst);
  // Threads of ours that passed their check before the store finish their
  // step without waiting on anything; after them nobody touches the slot.
  // If one does not (preempted for the whole bound), the slot is kept: it
  // dies with the process, and a reaper then drops it whole.
  if (!wait_for_own_threads(me)) return;
  // With the mutex held no recount runs, so subtracting our held from used
  // keeps I1 exact however other processes reserve meanwhile.
  const uint32_t devices = published_devices(layout);
  for (uint32_t d = 0; d < devices; ++d) {
    const uint64_t held = me.held[d].exchange(0, std::memory_order_relaxed);
    if (held != 0) layout.devices[d].used.fetch_sub(held, std::memory_order_relaxed);
  }
  me.pid.store(0, std::memory_order_release);
  liveness::drop(fd_, static_cast<uint32_t>(slot_));
}

void TenantLedger::after_fork_in_child() noexcept {
  // Only async-signal-safe calls: this runs in a pthread_atfork child
  // handler. Closing our copy of the descriptor leaves the parent's liveness
  // lock in place, since the parent's copy keeps the description open; the
  // parent's slot is never written.
  attached_.store(false, std::memory_order_relaxed);
  unmap();
}

void TenantLedger::unmap() noexcept {
  if (layout_) unmap_layout(layout_);
  if (fd_ >= 0) close(fd_);
  layout_ = nullptr;
  fd_ = -1;
  slot_ = -1;
}

LedgerAccess TenantLedger::access() const noexcept {
  return LedgerAccess{layout_, fd_, slot_};
}

bool TenantLedger::valid_device(int dev) const noexcept {
  return attached() && dev >= 0 && static_cast<uint32_t>(dev) < published_devices(*layout_);
}

int TenantLedger::device(const unsigned char uuid[16], uint64_t cap_if_new) noexcept {
  if (!attached()) return -1;
  LedgerLayout& layout = *layout_;
  if (const int known = find_device(layout, uuid); known >= 0) return known;
  // Registering a device is part of attaching to it: it takes the mutex.
  const ReaperLock lock(access(), ReaperLock::Mode::kWait);
  if (!lock.held()) return -1;
  if (const int known = find_device(layout, uuid); known >= 0) return known;
  const uint32_t count = published_devices(layout);
  if (count == kMaxDevices) return -1;
  DeviceEntry& entry = layout.devices[count];
  std::memcpy(entry.uuid, uuid, sizeof entry.uuid);
  entry.cap = cap_if_new;
  entry.used.store(0, std::memory_order_relaxed);
  entry.oom_denials.store(0, std::memory_order_relaxed);
  layout.device_count.store(count + 1, std::memory_order_release);
  return static_cast<int>(count);
}

uint32_t TenantLedger::device_count() const noexcept {
  return attached() ? published_devices(*layout_) : 0;
}

uint64_t TenantLedger::cap(int dev) const noexcept {
  return valid_device(dev) ? layout_->devices[dev].cap : 0;
}

uint64_t TenantLedger::used(int dev) const noexcept {
  return valid_device(dev) ? layout_->devices[dev].used.load(std::memory_order_relaxed) : 0;
}

uint64_t TenantLedger::held(int dev) const noexcept {
  return valid_device(dev) ? layout_->slots[slot_].held[dev].load(std::memory_order_relaxed) : 0;
}

bool TenantLedger::reserve(int dev, uint64_t bytes) noexcept {
  uint64_t need = 0;
  return take(dev, bytes, nullptr, &need) == Reservation::kTaken;
}

TenantLedger::Reservation TenantLedger::reserve_within(int dev, uint64_t bytes,
                                                       const std::atomic<uint64_t>& lease,
                                                       uint64_t* need) noexcept {
  return take(dev, bytes, &lease, need);
}

TenantLedger::Reservation TenantLedger::take(int dev, uint64_t bytes,
                                             const std::atomic<uint64_t>* lease,
                                             uint64_t* need) noexcept {
  if (!valid_device(dev)) return Reservation::kOverCap;
  if (bytes == 0) return Reservation::kTaken;
  const LedgerAccess ledger = access();
  ProcessSlot& me = ledger.layout->slots[slot_];
  DeviceEntry& device = ledger.layout->devices[dev];
  for (int attempt = 1;; ++attempt) {
    if (!enter_hot_path(attached_, ledger, me)) return Reservation::kOverCap;
    me.held[dev].fetch_add(bytes, std::memory_order_relaxed);  // R3
    GPULIMIT_SHM_SEAM(kInFlight);
    const Reservation taken = take_under_cap(device, bytes, lease, need);  // R4
    if (taken != Reservation::kTaken) me.held[dev].fetch_sub(bytes, std::memory_order_relaxed);
    me.inflight.fetch_sub(1, std::memory_order_release);  // R5
    // Past the lease: only the server can help, not a reap.
    if (taken != Reservation::kOverCap) return taken;
    if (attempt == 2) {
      // Counted once per refused reserve, after the reap gave it its chance.
      device.oom_denials.fetch_add(1, std::memory_order_relaxed);
      return Reservation::kOverCap;
    }
    // No room; dead processes' bytes may still be counted. Reap (out of
    // flight, or the recount would wait for us) and try once more.
    reap_if_dead_slots();
  }
}

void TenantLedger::release(int dev, uint64_t bytes) noexcept {
  if (!valid_device(dev) || bytes == 0) return;
  const LedgerAccess ledger = access();
  ProcessSlot& me = ledger.layout->slots[slot_];
  if (!enter_hot_path(attached_, ledger, me)) return;  // detach() gave everything back
  me.held[dev].fetch_sub(bytes, std::memory_order_relaxed);
  GPULIMIT_SHM_SEAM(kInFlight);
  ledger.layout->devices[dev].used.fetch_sub(bytes, std::memory_order_relaxed);
  me.inflight.fetch_sub(1, std::memory_order_release);
}

bool TenantLedger::reap() noexcept {
  if (!attached()) return false;
  const ReaperLock lock(access(), ReaperLock::Mode::kWait);
  return lock.held() && recount(access());
}

void TenantLedger::reap_if_dead_slots() noexcept {
  const ReaperLock lock(access(), ReaperLock::Mode::kWait);
  if (lock.held() && has_dead_slot(access())) recount(access());
}

std::vector<ProcessHolding> TenantLedger::processes() const {
  std::vector<ProcessHolding> taken;
  if (!attached()) return taken;
  const LedgerLayout& layout = *layout_;
  const uint32_t slots = slots_ever_taken(layout);
  for (uint32_t i = 0; i < slots; ++i) {
    const ProcessSlot& slot = layout.slots[i];
    ProcessHolding holding;
    holding.pid = slot.pid.load(std::memory_order_acquire);
    if (holding.pid == 0) continue;
    holding.live = slot_is_live(access(), i);
    for (uint32_t d = 0; d < kMaxDevices; ++d)
      holding.held[d] = slot.held[d].load(std::memory_order_relaxed);
    taken.push_back(holding);
  }
  return taken;
}

std::vector<std::string> TenantLedger::stale_ledgers(const std::string& dir, uid_t uid) noexcept {
  std::vector<std::string> stale;
  DIR* directory = opendir(dir.c_str());
  if (!directory) return stale;
  try {
    const std::string prefix = "gpulimit-" + std::to_string(uid) + "-";
    while (const dirent* entry = readdir(directory)) {
      const std::string_view name = entry->d_name;
      if (name.size() < prefix.size() + kLedgerSuffix.size() || !name.starts_with(prefix) ||
          !name.ends_with(kLedgerSuffix))
        continue;
      const std::string_view tenant =
          name.substr(prefix.size(), name.size() - prefix.size() - kLedgerSuffix.size());
      if (!valid_tenant(tenant)) continue;
      std::string path = dir + "/" + std::string(name);
      if (ledger_is_stale(path, uid, false)) stale.push_back(std::move(path));
    }
    std::sort(stale.begin(), stale.end());
  } catch (...) {  // std::bad_alloc
    stale.clear();
  }
  closedir(directory);
  return stale;
}

bool TenantLedger::remove_if_stale(const std::string& path) noexcept {
  return ledger_is_stale(path, geteuid(), true);
}

}  // namespace gpulimit::shm
