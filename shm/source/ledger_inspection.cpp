#include "gpulimit/shm/ledger_inspection.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <new>

#include "ledger_file.h"
#include "ledger_layout.h"
#include "reaper.h"

namespace gpulimit::shm {
namespace {

// The bytes of the layout that hold the devices: everything before the slots.
constexpr std::size_t kDevicesEnd = offsetof(LedgerLayout, slots);

std::string describe_errno(const std::string& path, const char* what) {
  return path + ": " + what + ": " + std::strerror(errno);
}

// Short enough for the string's inline buffer: assigning it cannot throw.
void note_out_of_memory(std::string& error) noexcept {
  error = "out of memory";
}

// The ledger at `path`, opened without following a symlink, creating or
// blocking (a FIFO planted under the name must not stall the caller).
// -1 with `error` set, and `absent` when there is no file.
int open_ledger(const std::string& path, int access, uid_t owner, bool& absent,
                std::string& error) {
  absent = false;
  int fd;
  do {
    fd = ::open(path.c_str(), access | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    absent = errno == ENOENT;
    error = describe_errno(path, "cannot open the ledger");
    return -1;
  }
  struct stat status {};
  if (fstat(fd, &status) < 0 || !S_ISREG(status.st_mode) || status.st_uid != owner) {
    error = path + ": not a regular file owned by uid " + std::to_string(owner);
    ::close(fd);
    return -1;
  }
  return fd;
}

off_t file_size(int fd) {
  struct stat status {};
  return fstat(fd, &status) == 0 ? status.st_size : 0;
}

template <typename T>
T field_at(const unsigned char* bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes + offset, sizeof value);
  return value;
}

// Holds the ledger's creation lock (flock) for a scope, without waiting.
class CreationLockAttempt {
 public:
  explicit CreationLockAttempt(int fd) : fd_(fd) {
    int result;
    do {
      result = flock(fd_, LOCK_EX | LOCK_NB);
    } while (result < 0 && errno == EINTR);
    held_ = result == 0;
  }
  CreationLockAttempt(const CreationLockAttempt&) = delete;
  CreationLockAttempt& operator=(const CreationLockAttempt&) = delete;
  ~CreationLockAttempt() {
    if (held_) flock(fd_, LOCK_UN);
  }
  bool held() const { return held_; }

 private:
  int fd_;
  bool held_ = false;
};

LedgerReapOutcome reap_open_ledger(int fd, const std::string& path, std::string& error) {
  // Openers hold this lock while they attach, and rebuild (truncate) a file
  // only under it: with it held nobody truncates the file under our mapping.
  const CreationLockAttempt creation_lock(fd);
  if (!creation_lock.held()) {
    error = path + ": a process is opening the ledger";
    return LedgerReapOutcome::kBusy;
  }
  if (!still_named(fd, path)) {
    error = path + ": removed while being reaped";
    return LedgerReapOutcome::kAbsent;
  }
  if (std::string problem = layout_problem(fd, file_size(fd)); !problem.empty()) {
    error = path + ": " + problem;
    return LedgerReapOutcome::kUnusable;
  }
  LedgerLayout* layout = map_file(fd);
  if (!layout) {
    error = describe_errno(path, "cannot map the ledger");
    return LedgerReapOutcome::kUnusable;
  }
  LedgerReapOutcome outcome = LedgerReapOutcome::kReaped;
  if (std::string problem = counts_problem(*layout); !problem.empty()) {
    error = path + ": " + problem;
    outcome = LedgerReapOutcome::kUnusable;
  } else {
    // Own slot -1: this descriptor holds no liveness lock, so every slot whose
    // lock another description holds is live, and every other taken slot dead.
    const LedgerAccess access{layout, fd, -1};
    const ReaperLock lock(access, ReaperLock::Mode::kTry);
    if (!lock.held()) {
      error = path + ": another process holds the ledger's reaper lock";
      outcome = LedgerReapOutcome::kBusy;
    } else if (has_dead_slot(access) && !recount(access)) {
      error = path + ": a live process stayed in the middle of reserve or release";
      outcome = LedgerReapOutcome::kBusy;
    }
  }
  unmap_layout(layout);
  return outcome;
}

}  // namespace

bool read_ledger_usage(const std::string& path, uid_t owner,
                       std::vector<LedgerDeviceUsage>& devices, std::string& error) noexcept {
  try {
    devices.clear();
    bool absent;
    const int fd = open_ledger(path, O_RDONLY, owner, absent, error);
    if (fd < 0) return false;
    std::string problem = layout_problem(fd, file_size(fd));
    std::vector<unsigned char> bytes(kDevicesEnd);
    if (problem.empty() &&
        pread(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()))
      problem = "is too short to be a gpulimit ledger (damaged?)";
    ::close(fd);
    if (!problem.empty()) {
      error = path + ": " + problem;
      return false;
    }
    const uint32_t count = field_at<uint32_t>(bytes.data(), offsetof(LedgerLayout, device_count));
    if (count > kMaxDevices) {
      error = path + ": is damaged: its device count is out of range";
      return false;
    }
    for (uint32_t d = 0; d < count; ++d) {
      const std::size_t entry = offsetof(LedgerLayout, devices) + d * sizeof(DeviceEntry);
      LedgerDeviceUsage usage;
      std::memcpy(usage.uuid.data(), bytes.data() + entry + offsetof(DeviceEntry, uuid),
                  usage.uuid.size());
      usage.cap = field_at<uint64_t>(bytes.data(), entry + offsetof(DeviceEntry, cap));
      usage.used = field_at<uint64_t>(bytes.data(), entry + offsetof(DeviceEntry, used));
      usage.oom_denials =
          field_at<uint64_t>(bytes.data(), entry + offsetof(DeviceEntry, oom_denials));
      devices.push_back(usage);
    }
    return true;
  } catch (const std::bad_alloc&) {
    devices.clear();
    note_out_of_memory(error);
    return false;
  }
}

LedgerReapOutcome reap_ledger(const std::string& path, uid_t owner, std::string& error) noexcept {
  try {
    bool absent;
    const int fd = open_ledger(path, O_RDWR, owner, absent, error);
    if (fd < 0) return absent ? LedgerReapOutcome::kAbsent : LedgerReapOutcome::kUnusable;
    const LedgerReapOutcome outcome = reap_open_ledger(fd, path, error);
    ::close(fd);
    return outcome;
  } catch (const std::bad_alloc&) {
    note_out_of_memory(error);
    return LedgerReapOutcome::kBusy;
  }
}

}  // namespace gpulimit::shm
