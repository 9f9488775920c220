// The simulated GPUs' state shared by every process on the machine: device
// memory in use (per process, so that a dead process's memory comes back), the
// device timelines on which kernels of all processes are serialised, and the
// machine's configuration. One file, mapped by libcuda and libnvidia-ml of
// every process.
//
// Crash safety: a process may be SIGKILLed at any instruction.
//  * Liveness is an OFD lock on one byte per process slot. The kernel drops it
//    when the process dies, so a dead slot is told apart from a live one
//    without trusting pids (which are reused).
//  * Every change of a slot's memory is one atomic store, made under a robust
//    process-shared mutex. A holder that dies leaves the data consistent; the
//    next locker marks the mutex consistent and goes on.
//  * Timelines are reserved with a lock-free compare-and-swap, so a process
//    that dies mid-kernel holds nothing but the interval it reserved.
//  * Memory exported with cuIpcGetMemHandle has a record. Each process that
//    maps it holds a read lock on the record's byte of the file (dropped by
//    the kernel when it dies). The exporter's slot holds the charge until it
//    frees the memory or dies; then the record holds it (counted in used())
//    until no process maps it any more.
//  * Busy time (for NVML's utilization) is kept in rings of time buckets, per
//    device (counted when reserved) and per process slot (counted when a
//    kernel completes); each bucket is one word holding its epoch and its
//    busy nanoseconds, changed by compare-and-swap. A process killed between
//    two buckets of one kernel leaves the kernel counted in part.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "config.h"

namespace fakecuda {

inline constexpr uint32_t kMaxProcesses = 1024;
inline constexpr uint32_t kMaxIpcExports = 4096;

struct ProcessUsage {
  pid_t pid;
  uint64_t bytes;
};

struct Interval {
  uint64_t start_ns;
  uint64_t end_ns;
};

// NVML's sample period: utilization is the busy fraction of the last second.
inline constexpr uint64_t kUtilizationWindowNs = 1'000'000'000;

struct ProcessBusy {
  pid_t pid;
  uint64_t last_active_ns;  // end of its latest kernel on the device (may be ahead of now)
  uint32_t percent;         // of the window ending at the query, 0..100
};

class SharedState {
 public:
  // Maps the state file at `path`, creating it for `wanted` if it is absent,
  // of another layout version, or describes another machine and no process
  // is attached. Returns nullptr with `error` set when live processes use the
  // file with a different machine configuration.
  static SharedState* open(const std::string& path, const MachineConfig& wanted,
                           std::string& error);

  const MachineConfig& machine() const;

  // Takes a process slot for the caller (once per process). False when all
  // slots hold live processes.
  bool attach();
  // Forgets the slot and mapping inherited across fork without touching the
  // parent's lock; the child starts detached.
  void forget_after_fork();

  // Charges `bytes` of device `dev` (physical index) to this process.
  // False, with nothing charged, when the device does not have them free.
  bool charge(uint32_t dev, uint64_t bytes);
  void uncharge(uint32_t dev, uint64_t bytes);

  // Bytes in use on the device by all live processes.
  uint64_t used(uint32_t dev);
  // Live processes holding memory or a context on `dev`; returns how many
  // exist (may exceed `capacity`; only `capacity` are written).
  size_t processes(uint32_t dev, ProcessUsage* out, size_t capacity);

  // IPC memory. `id` names the memory machine-wide (never 0; the memfd's
  // inode). The exporter registers memory already charged to it; false when
  // the table is full.
  bool ipc_export(uint32_t dev, uint64_t bytes, uint64_t id, uint32_t* record);
  // The exporter frees it (`bytes` of `dev`, as charged): the charge leaves
  // its slot and stays with the record while some process maps the memory.
  void ipc_unexport(uint32_t record, uint64_t id, uint32_t dev, uint64_t bytes);
  // An opener maps it: false when the record no longer holds exported memory
  // `id` (freed, or the exporter died). Counted per process; `ipc_close`
  // undoes one open.
  bool ipc_open(uint32_t record, uint64_t id);
  // The record of exported memory `id` whose exporter still holds it, with
  // its device and bytes; false when there is none.
  bool ipc_find(uint64_t id, uint32_t* record, uint32_t* dev, uint64_t* bytes);
  void ipc_close(uint32_t record);

  void context_created(uint32_t dev);
  void context_destroyed(uint32_t dev);

  // Reserves the next free interval of `duration_ns` on device `dev`'s
  // timeline, starting no earlier than `not_before_ns`.
  // The interval is counted as busy time of the device at once.
  Interval reserve(uint32_t dev, uint64_t not_before_ns, uint64_t duration_ns);
  // A kernel of this process ran in `ran` on `dev`: counted as its busy time.
  void kernel_done(uint32_t dev, Interval ran);

  // Percent of the kUtilizationWindowNs before `now` during which device
  // `dev` ran a kernel of any process.
  uint32_t utilization(uint32_t dev, uint64_t now);
  // Live processes that ran a kernel on `dev` within the window before
  // `now`, with their share of it; returns how many exist (only `capacity`
  // are written).
  size_t process_utilization(uint32_t dev, uint64_t now, ProcessBusy* out, size_t capacity);
  // Every nanosecond of kernels ever reserved on `dev` (some may lie ahead).
  uint64_t busy_total(uint32_t dev) const;
  // When the simulated machine was built (the driver "loaded"), now_ns() clock.
  uint64_t created_ns() const;

 private:
  struct Layout;
  SharedState(int fd, Layout* layout) : fd_(fd), layout_(layout) {}

  void lock();
  void unlock();
  bool slot_alive(uint32_t slot) const;
  void reap_dead_locked();
  uint64_t used_locked(uint32_t dev) const;
  uint32_t slots_in_use() const;
  bool ipc_mapped_elsewhere(uint32_t record) const;
  void ipc_settle_locked(uint32_t record);

  int fd_;
  Layout* layout_;
  int slot_ = -1;
  uint32_t ipc_opens_[kMaxIpcExports] = {};  // this process's opens of each record
};

// CLOCK_MONOTONIC in nanoseconds: the one clock every process and the trace use.
uint64_t now_ns();

}  // namespace fakecuda
