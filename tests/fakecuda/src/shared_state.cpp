#include "shared_state.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <string>

namespace fakecuda {
namespace {

constexpr uint64_t kMagic = 0x6661'6b65'6375'6461;  // "fakecuda"
constexpr uint32_t kVersion = 3;                    // 2: IPC records; 3: busy-time buckets
// Liveness locks sit far past the end of the file, one byte per slot, so their
// place does not depend on the layout (a process of another layout version
// still sees them).
constexpr off_t kLockBase = off_t{1} << 40;
// Mapping locks of IPC records: one byte per record, read-locked by each
// process that maps the record's memory.
constexpr off_t kIpcLockBase = kLockBase + (off_t{1} << 20);

int retry_fcntl(int fd, int cmd, struct flock* lock) {
  int r;
  do {
    r = fcntl(fd, cmd, lock);
  } while (r < 0 && errno == EINTR);
  return r;
}

struct flock byte_range(short type, off_t start, off_t len) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = start;
  lock.l_len = len;
  return lock;
}

// True when some process holds a liveness lock in [first, first + count).
bool locked_by_other(int fd, uint32_t first, uint32_t count) {
  struct flock lock = byte_range(F_WRLCK, kLockBase + first, count);
  if (retry_fcntl(fd, F_OFD_GETLK, &lock) < 0) return true;  // unknown: assume alive
  return lock.l_type != F_UNLCK;
}

// Opens the state file at `path`, creating it if absent. The simulated GPU
// is shared by every user, as a real one is, so the file must be 0666 from
// the moment anyone can open it: created with O_CREAT it would carry the
// creator's umask until a fchmod, and a process of another user opening it
// in between would be refused. It is made under a temporary name, given its
// mode, then linked into place; whoever links first wins, the others open
// theirs. -1 with errno on failure.
int open_shared_file(const std::string& path) {
  for (;;) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0 || errno != ENOENT) return fd;
    std::string temporary = path + ".XXXXXX";
    const int made = mkostemp(temporary.data(), O_CLOEXEC);
    if (made < 0) return -1;
    const bool linked = fchmod(made, 0666) == 0 && link(temporary.c_str(), path.c_str()) == 0;
    const int link_error = errno;
    unlink(temporary.c_str());
    if (linked) return made;
    ::close(made);
    if (link_error != EEXIST) {
      errno = link_error;
      return -1;
    }
  }
}

// Busy time in buckets of 100 ms. Each bucket word holds the bucket's epoch
// (its start time / kBucketNs) above kBusyBits bits of busy nanoseconds. A
// ring must hold the window and the bucket it starts in; a device's ring
// also holds the future its timeline is reserved for (kernels are counted
// when reserved, so that a long kernel shows while it runs), a process's
// only the past (its kernels are counted when they complete).
constexpr uint64_t kBucketNs = 100'000'000;
constexpr uint32_t kWindowBuckets = kUtilizationWindowNs / kBucketNs + 1;
constexpr unsigned kBusyBits = 27;
static_assert(kBucketNs < (uint64_t{1} << kBusyBits));
constexpr uint64_t kBusyMask = (uint64_t{1} << kBusyBits) - 1;

template <uint32_t kBuckets>
using BusyRing = std::atomic<uint64_t>[kBuckets];
constexpr uint32_t kDeviceBuckets = 64;  // 5.3 s of reservations ahead
constexpr uint32_t kProcessBuckets = kWindowBuckets + 1;
using DeviceBusy = BusyRing<kDeviceBuckets>;
using ProcessBusyRing = BusyRing<kProcessBuckets>;

// Adds the part of [start, end) in each bucket; a bucket a later epoch has
// taken over keeps its own. Epochs so far ahead of `now` that their bucket
// still holds part of the window are dropped: time reserved beyond the
// ring's reach goes uncounted.
template <uint32_t kBuckets>
void add_busy(BusyRing<kBuckets>& ring, Interval interval, uint64_t now) {
  if (interval.end_ns <= interval.start_ns) return;
  const uint64_t horizon = now / kBucketNs + (kBuckets - kWindowBuckets);
  const uint64_t last = std::min((interval.end_ns - 1) / kBucketNs, horizon);
  uint64_t first = interval.start_ns / kBucketNs;
  if (first > last) return;
  if (last - first >= kBuckets) first = last - kBuckets + 1;  // only the newest fit
  for (uint64_t epoch = first; epoch <= last; ++epoch) {
    const uint64_t from = std::max(interval.start_ns, epoch * kBucketNs);
    const uint64_t to = std::min(interval.end_ns, (epoch + 1) * kBucketNs);
    std::atomic<uint64_t>& bucket = ring[epoch % kBuckets];
    uint64_t current = bucket.load(std::memory_order_relaxed);
    uint64_t next;
    do {
      const uint64_t held = current >> kBusyBits;
      if (held > epoch) break;
      const uint64_t busy = held == epoch ? current & kBusyMask : 0;
      next = epoch << kBusyBits | std::min(busy + (to - from), kBucketNs);
    } while (!bucket.compare_exchange_weak(current, next, std::memory_order_relaxed));
  }
}

// Busy nanoseconds in (now - window, now]: the bucket the window starts in
// counts in proportion, the current one no further than now.
template <uint32_t kBuckets>
uint64_t busy_in_window(const BusyRing<kBuckets>& ring, uint64_t now) {
  const uint64_t window_start = now > kUtilizationWindowNs ? now - kUtilizationWindowNs : 0;
  uint64_t total = 0;
  for (uint64_t epoch = window_start / kBucketNs; epoch <= now / kBucketNs; ++epoch) {
    const uint64_t word = ring[epoch % kBuckets].load(std::memory_order_relaxed);
    if (word >> kBusyBits != epoch) continue;
    uint64_t busy = word & kBusyMask;
    const uint64_t bucket_start = epoch * kBucketNs;
    if (bucket_start < window_start)
      busy = busy * (bucket_start + kBucketNs - window_start) / kBucketNs;
    if (now < bucket_start + kBucketNs) busy = std::min(busy, now - bucket_start);
    total += busy;
  }
  return total;
}

uint32_t percent_of_window(uint64_t busy_ns) {
  return static_cast<uint32_t>(std::min<uint64_t>(100, busy_ns * 100 / kUtilizationWindowNs));
}

template <uint32_t kBuckets>
void clear_ring(BusyRing<kBuckets>& ring) {
  for (auto& bucket : ring)
    bucket.store(0, std::memory_order_relaxed);
}

}  // namespace

struct alignas(64) Slot {
  std::atomic<int32_t> pid;  // 0: free
  std::atomic<uint32_t> contexts[kMaxDevices];
  std::atomic<uint64_t> held[kMaxDevices];
  std::atomic<uint64_t> last_active_ns[kMaxDevices];
  ProcessBusyRing busy[kMaxDevices];
};

struct alignas(64) Timeline {
  std::atomic<uint64_t> busy_until_ns;
  std::atomic<uint64_t> busy_total_ns;
  DeviceBusy busy;
};

// Memory exported with cuIpcGetMemHandle. Free while `id` is 0. While
// `owner_slot` names the exporter (alive, with `owner_pid`), its slot holds the
// charge; once the exporter freed the memory or died, `owner_slot` is -1 and
// `bytes` count as used until no process maps the memory.
struct alignas(64) IpcRecord {
  std::atomic<uint64_t> id;
  std::atomic<int32_t> owner_slot;
  std::atomic<int32_t> owner_pid;
  std::atomic<uint32_t> device;
  std::atomic<uint64_t> bytes;
};

struct SharedState::Layout {
  uint64_t magic;
  uint32_t version;
  uint32_t layout_size;
  MachineConfig machine;
  uint64_t created_ns;
  pthread_mutex_t mutex;               // robust, process-shared; guards slot changes
  std::atomic<uint32_t> slots_in_use;  // high-water mark of slot indices ever taken
  Timeline timelines[kMaxDevices];
  Slot slots[kMaxProcesses];
  std::atomic<uint32_t> ipc_in_use;  // high-water mark of record indices ever taken
  IpcRecord ipc[kMaxIpcExports];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);

uint64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

SharedState* SharedState::open(const std::string& path, const MachineConfig& wanted,
                               std::string& error) {
  int fd = open_shared_file(path);
  if (fd < 0) {
    error = "cannot open " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  int r;
  do {
    r = flock(fd, LOCK_EX);
  } while (r < 0 && errno == EINTR);

  auto fail = [&](std::string message) -> SharedState* {
    error = std::move(message);
    flock(fd, LOCK_UN);
    close(fd);
    return nullptr;
  };

  struct stat st {};
  if (fstat(fd, &st) < 0) return fail("cannot stat " + path + ": " + std::strerror(errno));
  const bool sized = static_cast<size_t>(st.st_size) >= sizeof(Layout);
  if (!sized && ftruncate(fd, sizeof(Layout)) < 0)
    return fail("cannot size " + path + ": " + std::strerror(errno));
  void* map = mmap(nullptr, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return fail("cannot map " + path + ": " + std::strerror(errno));
  auto* layout = static_cast<Layout*>(map);

  // A file of ours whose counts are out of range was damaged: not ours.
  const bool ours = sized && layout->magic == kMagic && layout->version == kVersion &&
                    layout->layout_size == sizeof(Layout) &&
                    layout->machine.device_count <= kMaxDevices &&
                    layout->slots_in_use.load(std::memory_order_relaxed) <= kMaxProcesses;
  if (!ours || !(layout->machine == wanted)) {
    if (sized && locked_by_other(fd, 0, kMaxProcesses)) {
      munmap(map, sizeof(Layout));
      return fail(path + " is in use by running processes that simulate " +
                  (ours ? std::string("another machine (different FAKECUDA_* settings)")
                        : std::string("with another fakecuda version, or it is damaged")) +
                  "; use the same settings or another FAKECUDA_STATE");
    }
    // Nobody is attached: (re)build the machine as asked. The magic is written
    // last; readers hold the flock until it is, so nobody sees half a layout.
    std::memset(map, 0, sizeof(Layout));
    layout->version = kVersion;
    layout->layout_size = sizeof(Layout);
    layout->machine = wanted;
    layout->created_ns = now_ns();
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&layout->mutex, &attr);
    pthread_mutexattr_destroy(&attr);
    // A release store rather than a fence and a plain store: same ordering,
    // and GCC refuses fences under -fsanitize=thread.
    std::atomic_ref<uint64_t>(layout->magic).store(kMagic, std::memory_order_release);
    msync(map, sizeof(Layout), MS_SYNC);
  }
  flock(fd, LOCK_UN);
  return new (std::nothrow) SharedState(fd, layout);
}

const MachineConfig& SharedState::machine() const {
  return layout_->machine;
}

void SharedState::lock() {
  int r = pthread_mutex_lock(&layout_->mutex);
  if (r == EOWNERDEAD) {
    // The holder died. Every change it could have been making is a single
    // atomic store or an idempotent step of reaping, so the data is
    // consistent as it stands.
    pthread_mutex_consistent(&layout_->mutex);
  }
}

void SharedState::unlock() {
  pthread_mutex_unlock(&layout_->mutex);
}

bool SharedState::slot_alive(uint32_t slot) const {
  if (static_cast<int>(slot) == slot_) return true;
  return locked_by_other(fd_, slot, 1);
}

void SharedState::reap_dead_locked() {
  const uint32_t n = slots_in_use();
  for (uint32_t i = 0; i < n; ++i) {
    Slot& s = layout_->slots[i];
    if (s.pid.load(std::memory_order_relaxed) == 0 || slot_alive(i)) continue;
    // Idempotent: a reaper killed half-way leaves a dead slot for the next.
    for (uint32_t d = 0; d < kMaxDevices; ++d) {
      s.held[d].store(0, std::memory_order_relaxed);
      s.contexts[d].store(0, std::memory_order_relaxed);
      s.last_active_ns[d].store(0, std::memory_order_relaxed);
      clear_ring(s.busy[d]);
    }
    s.pid.store(0, std::memory_order_release);
  }
  // Dead slots have pid 0 now, so an exporter is alive exactly when its
  // slot still carries its pid.
  const uint32_t records =
      std::min(layout_->ipc_in_use.load(std::memory_order_relaxed), kMaxIpcExports);
  for (uint32_t i = 0; i < records; ++i)
    if (layout_->ipc[i].id.load(std::memory_order_relaxed) != 0) ipc_settle_locked(i);
}

bool SharedState::attach() {
  if (slot_ >= 0) return true;
  bool attached = false;
  lock();
  reap_dead_locked();
  for (uint32_t i = 0; i < kMaxProcesses && !attached; ++i) {
    Slot& s = layout_->slots[i];
    if (s.pid.load(std::memory_order_relaxed) != 0) continue;
    struct flock lock = byte_range(F_WRLCK, kLockBase + i, 1);
    if (retry_fcntl(fd_, F_OFD_SETLK, &lock) < 0) continue;
    for (uint32_t d = 0; d < kMaxDevices; ++d) {
      s.held[d].store(0, std::memory_order_relaxed);
      s.contexts[d].store(0, std::memory_order_relaxed);
      s.last_active_ns[d].store(0, std::memory_order_relaxed);
      clear_ring(s.busy[d]);
    }
    s.pid.store(getpid(), std::memory_order_release);
    uint32_t in_use = slots_in_use();
    if (i + 1 > in_use) layout_->slots_in_use.store(i + 1, std::memory_order_relaxed);
    slot_ = static_cast<int>(i);
    attached = true;
  }
  unlock();
  return attached;
}

void SharedState::forget_after_fork() {
  // The child shares the parent's open file description, and with it the
  // parent's liveness lock; closing our copy leaves the lock with the parent.
  munmap(layout_, sizeof(Layout));
  close(fd_);
  layout_ = nullptr;
  fd_ = -1;
  slot_ = -1;
}

uint32_t SharedState::slots_in_use() const {
  return std::min(layout_->slots_in_use.load(std::memory_order_relaxed), kMaxProcesses);
}

uint64_t SharedState::used_locked(uint32_t dev) const {
  uint64_t total = 0;
  const uint32_t n = slots_in_use();
  for (uint32_t i = 0; i < n; ++i) {
    const Slot& s = layout_->slots[i];
    if (s.pid.load(std::memory_order_relaxed) != 0)
      total += s.held[dev].load(std::memory_order_relaxed);
  }
  const uint32_t records =
      std::min(layout_->ipc_in_use.load(std::memory_order_relaxed), kMaxIpcExports);
  for (uint32_t i = 0; i < records; ++i) {
    const IpcRecord& r = layout_->ipc[i];
    if (r.id.load(std::memory_order_relaxed) != 0 &&
        r.owner_slot.load(std::memory_order_relaxed) < 0 &&
        r.device.load(std::memory_order_relaxed) == dev)
      total += r.bytes.load(std::memory_order_relaxed);
  }
  return total;
}

bool SharedState::charge(uint32_t dev, uint64_t bytes) {
  if (slot_ < 0 || dev >= layout_->machine.device_count) return false;
  const uint64_t total = layout_->machine.devices[dev].total_mem;
  lock();
  uint64_t in_use = used_locked(dev);
  if (bytes > total - std::min(total, in_use)) {
    reap_dead_locked();  // the real driver frees a dead process's memory at once
    in_use = used_locked(dev);
  }
  const bool ok = bytes <= total - std::min(total, in_use);
  if (ok) layout_->slots[slot_].held[dev].fetch_add(bytes, std::memory_order_relaxed);
  unlock();
  return ok;
}

void SharedState::uncharge(uint32_t dev, uint64_t bytes) {
  if (slot_ < 0 || dev >= kMaxDevices) return;
  layout_->slots[slot_].held[dev].fetch_sub(bytes, std::memory_order_relaxed);
}

uint64_t SharedState::used(uint32_t dev) {
  if (dev >= layout_->machine.device_count) return 0;
  lock();
  reap_dead_locked();
  uint64_t in_use = used_locked(dev);
  unlock();
  return in_use;
}

size_t SharedState::processes(uint32_t dev, ProcessUsage* out, size_t capacity) {
  if (dev >= layout_->machine.device_count) return 0;
  size_t found = 0;
  lock();
  reap_dead_locked();
  const uint32_t n = slots_in_use();
  for (uint32_t i = 0; i < n; ++i) {
    const Slot& s = layout_->slots[i];
    const int32_t pid = s.pid.load(std::memory_order_relaxed);
    const uint64_t held = s.held[dev].load(std::memory_order_relaxed);
    if (pid == 0 || (held == 0 && s.contexts[dev].load(std::memory_order_relaxed) == 0)) continue;
    if (found < capacity) out[found] = ProcessUsage{pid, held};
    ++found;
  }
  unlock();
  return found;
}

bool SharedState::ipc_mapped_elsewhere(uint32_t record) const {
  struct flock lock = byte_range(F_WRLCK, kIpcLockBase + record, 1);
  if (retry_fcntl(fd_, F_OFD_GETLK, &lock) < 0) return true;  // unknown: keep it
  return lock.l_type != F_UNLCK;
}

// Moves record `record` on as far as it goes: orphaned when its exporter is
// gone, free when moreover nobody maps it. Idempotent, so a process killed
// half-way leaves the next one to finish. Caller holds the mutex; dead slots
// have been reaped (pid 0).
void SharedState::ipc_settle_locked(uint32_t record) {
  IpcRecord& r = layout_->ipc[record];
  const int32_t owner = r.owner_slot.load(std::memory_order_relaxed);
  if (owner >= 0) {
    const bool alive = static_cast<uint32_t>(owner) < kMaxProcesses &&
                       layout_->slots[owner].pid.load(std::memory_order_relaxed) ==
                           r.owner_pid.load(std::memory_order_relaxed);
    if (alive) return;
    r.owner_slot.store(-1, std::memory_order_relaxed);
  }
  if (ipc_opens_[record] == 0 && !ipc_mapped_elsewhere(record))
    r.id.store(0, std::memory_order_release);
}

bool SharedState::ipc_export(uint32_t dev, uint64_t bytes, uint64_t id, uint32_t* record) {
  if (slot_ < 0 || id == 0) return false;
  bool done = false;
  lock();
  reap_dead_locked();  // frees the records of the dead
  for (uint32_t i = 0; i < kMaxIpcExports && !done; ++i) {
    IpcRecord& r = layout_->ipc[i];
    if (r.id.load(std::memory_order_relaxed) != 0) continue;
    // A stale opener of a former record of this index may still hold its
    // lock; the index is only reused once nobody does.
    if (ipc_mapped_elsewhere(i)) continue;
    r.device.store(dev, std::memory_order_relaxed);
    r.bytes.store(bytes, std::memory_order_relaxed);
    r.owner_pid.store(layout_->slots[slot_].pid.load(std::memory_order_relaxed),
                      std::memory_order_relaxed);
    r.owner_slot.store(slot_, std::memory_order_relaxed);
    r.id.store(id, std::memory_order_release);  // last: a record is whole once it has an id
    if (i + 1 > layout_->ipc_in_use.load(std::memory_order_relaxed))
      layout_->ipc_in_use.store(i + 1, std::memory_order_relaxed);
    *record = i;
    done = true;
  }
  unlock();
  return done;
}

void SharedState::ipc_unexport(uint32_t record, uint64_t id, uint32_t dev, uint64_t bytes) {
  if (slot_ < 0 || dev >= kMaxDevices) return;
  lock();
  IpcRecord* r = record < kMaxIpcExports ? &layout_->ipc[record] : nullptr;
  if (r && r->id.load(std::memory_order_relaxed) == id &&
      r->owner_slot.load(std::memory_order_relaxed) == slot_) {
    // The record takes the charge over, then the slot lets it go: killed in
    // between, the slot is reaped and the record is right as it stands.
    r->owner_slot.store(-1, std::memory_order_relaxed);
    layout_->slots[slot_].held[dev].fetch_sub(bytes, std::memory_order_relaxed);
    ipc_settle_locked(record);
  } else {
    layout_->slots[slot_].held[dev].fetch_sub(bytes, std::memory_order_relaxed);
  }
  unlock();
}

bool SharedState::ipc_open(uint32_t record, uint64_t id) {
  if (slot_ < 0 || record >= kMaxIpcExports || id == 0) return false;
  bool opened = false;
  lock();
  IpcRecord& r = layout_->ipc[record];
  const int32_t owner = r.owner_slot.load(std::memory_order_relaxed);
  if (r.id.load(std::memory_order_relaxed) == id && owner >= 0 &&
      static_cast<uint32_t>(owner) < kMaxProcesses &&
      layout_->slots[owner].pid.load(std::memory_order_relaxed) ==
          r.owner_pid.load(std::memory_order_relaxed) &&
      slot_alive(static_cast<uint32_t>(owner))) {
    opened = true;
    if (ipc_opens_[record] == 0) {
      struct flock lock = byte_range(F_RDLCK, kIpcLockBase + record, 1);
      opened = retry_fcntl(fd_, F_OFD_SETLK, &lock) == 0;
    }
    if (opened) ++ipc_opens_[record];
  }
  unlock();
  return opened;
}

bool SharedState::ipc_find(uint64_t id, uint32_t* record, uint32_t* dev, uint64_t* bytes) {
  if (slot_ < 0 || id == 0) return false;
  bool found = false;
  lock();
  reap_dead_locked();
  const uint32_t records =
      std::min(layout_->ipc_in_use.load(std::memory_order_relaxed), kMaxIpcExports);
  for (uint32_t i = 0; i < records && !found; ++i) {
    IpcRecord& r = layout_->ipc[i];
    if (r.id.load(std::memory_order_acquire) != id ||
        r.owner_slot.load(std::memory_order_relaxed) < 0)
      continue;
    *record = i;
    *dev = r.device.load(std::memory_order_relaxed);
    *bytes = r.bytes.load(std::memory_order_relaxed);
    found = true;
  }
  unlock();
  return found;
}

void SharedState::ipc_close(uint32_t record) {
  if (slot_ < 0 || record >= kMaxIpcExports || ipc_opens_[record] == 0) return;
  lock();
  if (--ipc_opens_[record] == 0) {
    struct flock lock = byte_range(F_UNLCK, kIpcLockBase + record, 1);
    retry_fcntl(fd_, F_OFD_SETLK, &lock);
    reap_dead_locked();  // settles this record with the others
  }
  unlock();
}

void SharedState::context_created(uint32_t dev) {
  if (slot_ >= 0 && dev < kMaxDevices)
    layout_->slots[slot_].contexts[dev].fetch_add(1, std::memory_order_relaxed);
}

void SharedState::context_destroyed(uint32_t dev) {
  if (slot_ >= 0 && dev < kMaxDevices)
    layout_->slots[slot_].contexts[dev].fetch_sub(1, std::memory_order_relaxed);
}

Interval SharedState::reserve(uint32_t dev, uint64_t not_before_ns, uint64_t duration_ns) {
  std::atomic<uint64_t>& busy = layout_->timelines[dev].busy_until_ns;
  uint64_t current = busy.load(std::memory_order_relaxed);
  Interval slot;
  do {
    slot.start_ns = std::max(current, not_before_ns);
    slot.end_ns = slot.start_ns + duration_ns;
  } while (!busy.compare_exchange_weak(current, slot.end_ns, std::memory_order_acq_rel,
                                       std::memory_order_relaxed));
  layout_->timelines[dev].busy_total_ns.fetch_add(duration_ns, std::memory_order_relaxed);
  add_busy(layout_->timelines[dev].busy, slot, now_ns());
  return slot;
}

void SharedState::kernel_done(uint32_t dev, Interval ran) {
  if (slot_ < 0 || dev >= layout_->machine.device_count) return;
  Slot& mine = layout_->slots[slot_];
  add_busy(mine.busy[dev], ran, now_ns());
  // Only this process's executor thread writes its slot's busy time, so a
  // plain maximum suffices.
  if (mine.last_active_ns[dev].load(std::memory_order_relaxed) < ran.end_ns)
    mine.last_active_ns[dev].store(ran.end_ns, std::memory_order_relaxed);
}

uint64_t SharedState::busy_total(uint32_t dev) const {
  if (dev >= layout_->machine.device_count) return 0;
  return layout_->timelines[dev].busy_total_ns.load(std::memory_order_relaxed);
}

uint64_t SharedState::created_ns() const {
  return layout_->created_ns;
}

uint32_t SharedState::utilization(uint32_t dev, uint64_t now) {
  if (dev >= layout_->machine.device_count) return 0;
  return percent_of_window(busy_in_window(layout_->timelines[dev].busy, now));
}

size_t SharedState::process_utilization(uint32_t dev, uint64_t now, ProcessBusy* out,
                                        size_t capacity) {
  if (dev >= layout_->machine.device_count) return 0;
  const uint64_t window_start = now > kUtilizationWindowNs ? now - kUtilizationWindowNs : 0;
  size_t found = 0;
  lock();
  reap_dead_locked();
  const uint32_t n = slots_in_use();
  for (uint32_t i = 0; i < n; ++i) {
    const Slot& s = layout_->slots[i];
    const int32_t pid = s.pid.load(std::memory_order_relaxed);
    const uint64_t last = s.last_active_ns[dev].load(std::memory_order_relaxed);
    if (pid == 0 || last <= window_start) continue;
    if (found < capacity)
      out[found] = ProcessBusy{pid, last, percent_of_window(busy_in_window(s.busy[dev], now))};
    ++found;
  }
  unlock();
  return found;
}

}  // namespace fakecuda
