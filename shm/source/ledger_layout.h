// The ledger as it lies in its file. Every process of the tenant maps the
// file at its own address, so the layout holds fixed-width fields and no
// pointers. LedgerHeader opens every layout version unchanged, so that a
// process of another version can tell the file is not for it.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "gpulimit/shm/tenant_ledger.h"

namespace gpulimit::shm {

inline constexpr uint64_t kLedgerMagic = 0x444c'6d69'6c75'7067;  // "gpulimLD" in file order
// Raise with every change of LedgerLayout below.
inline constexpr uint32_t kLedgerLayoutVersion = 2;

struct LedgerHeader {
  uint64_t magic;           // written last when the file is built
  uint32_t layout_version;  // kLedgerLayoutVersion of the builder
  uint32_t layout_size;     // sizeof(LedgerLayout) of the builder
};

struct alignas(64) DeviceEntry {
  unsigned char uuid[16];
  uint64_t cap;  // bytes; fixed before the entry is published
  // The tenant's bytes on the device: the one word the cap is checked on.
  std::atomic<uint64_t> used;
  // Reservations refused at the cap, for gpulimitd's statistics. Bumped only
  // on the refusal path, so the line every reserve reads stays read-mostly.
  std::atomic<uint64_t> oom_denials;
};

struct alignas(64) ProcessSlot {
  std::atomic<int32_t> pid;        // 0: free
  std::atomic<uint32_t> inflight;  // threads of the process inside reserve/release
  std::atomic<uint64_t> held[kMaxDevices];
};

struct LedgerLayout {
  LedgerHeader header;
  uint32_t max_devices;    // kMaxDevices of the builder
  uint32_t max_processes;  // kMaxProcesses of the builder
  // Read-mostly words, together on the line every reserve reads.
  std::atomic<uint32_t> device_count;     // entries of `devices` published
  std::atomic<uint32_t> slot_high_water;  // 1 + the highest slot index ever taken
  std::atomic<uint32_t> recount_seq;      // odd while a reaper recounts; a futex word
  // Robust and process-shared; taken by reapers, attach, detach and device
  // registration, never by reserve/release.
  alignas(64) pthread_mutex_t reaper_mutex;
  DeviceEntry devices[kMaxDevices];
  ProcessSlot slots[kMaxProcesses];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "recount_seq is a futex word");
static_assert(std::is_standard_layout_v<LedgerLayout>);
static_assert(sizeof(LedgerLayout) < (uint64_t{1} << 32), "layout_size is 32 bits");

// Counts read from shared memory are clamped before they index anything: a
// damaged or hostile file must not send a process out of its mapping.
inline uint32_t published_devices(const LedgerLayout& layout) {
  return std::min(layout.device_count.load(std::memory_order_acquire), kMaxDevices);
}

inline uint32_t slots_ever_taken(const LedgerLayout& layout) {
  return std::min(layout.slot_high_water.load(std::memory_order_acquire), kMaxProcesses);
}

}  // namespace gpulimit::shm
