// Lease pages live in sealed memfds, as the board does (sealed_memfd.h).
#include "gpulimit/shm/lease_page.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <new>

#include "gpulimit/shm/futex.h"
#include "sealed_memfd.h"

namespace gpulimit::shm {
namespace {

// Why the page in `fd` cannot be read by this library; empty when it can.
std::string layout_problem(int fd) {
  struct stat status {};
  if (fstat(fd, &status) < 0) return describe_errno("cannot stat gpulimitd's lease page");
  LeaseHeader header{};
  if (status.st_size < static_cast<off_t>(sizeof(LeaseLayout)) ||
      pread(fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header))
    return "gpulimitd's lease page is too short to be one";
  if (header.magic != kLeaseMagic) return "gpulimitd's lease page is not a gpulimit lease page";
  if (header.layout_version != kLeaseLayoutVersion || header.layout_size != sizeof(LeaseLayout))
    return "gpulimitd's lease page has layout " + std::to_string(header.layout_version) + " of " +
           std::to_string(header.layout_size) + " bytes, this library reads layout " +
           std::to_string(kLeaseLayoutVersion) + " of " + std::to_string(sizeof(LeaseLayout));
  return {};
}

}  // namespace

std::unique_ptr<LeasePage> LeasePage::create(uint32_t tenant_number, std::string& error) noexcept {
  try {
    void* mapping = nullptr;
    const int fd =
        create_sealed_memfd("gpulimit-lease", "a lease page", sizeof(LeaseLayout), &mapping, error);
    if (fd < 0) return nullptr;
    auto* layout = static_cast<LeaseLayout*>(mapping);
    layout->header.layout_version = kLeaseLayoutVersion;
    layout->header.layout_size = sizeof(LeaseLayout);
    layout->header.tenant_number = tenant_number;
    for (LeaseDevice& device : layout->devices) {
      device.lease.store(kNoLeaseLimit, std::memory_order_relaxed);
      device.room.store(kNoLeaseLimit, std::memory_order_relaxed);
    }
    std::atomic_ref<uint64_t>(layout->header.magic).store(kLeaseMagic, std::memory_order_release);
    if (!make_read_only(fd, "a lease page", error)) {
      munmap(mapping, sizeof(LeaseLayout));
      ::close(fd);
      return nullptr;
    }
    return std::unique_ptr<LeasePage>(new LeasePage(fd, layout, true));
  } catch (const std::bad_alloc&) {
    note_out_of_memory(error);
    return nullptr;
  }
}

std::unique_ptr<LeasePage> LeasePage::map_read_only(int fd, std::string& error) noexcept {
  try {
    if (std::string problem = layout_problem(fd); !problem.empty()) {
      error = std::move(problem);
      return nullptr;
    }
    void* mapping = mmap(nullptr, sizeof(LeaseLayout), PROT_READ, MAP_SHARED, fd, 0);
    if (mapping == MAP_FAILED) {
      error = describe_errno("cannot map gpulimitd's lease page");
      return nullptr;
    }
    return std::unique_ptr<LeasePage>(new LeasePage(fd, static_cast<LeaseLayout*>(mapping), false));
  } catch (const std::bad_alloc&) {
    note_out_of_memory(error);
    return nullptr;
  }
}

LeasePage::~LeasePage() {
  munmap(layout_, sizeof(LeaseLayout));
  ::close(fd_);
}

void LeasePage::set_lease(uint32_t board_device, uint64_t bytes) noexcept {
  if (writable_ && board_device < kBoardDevices)
    layout_->devices[board_device].lease.store(bytes, std::memory_order_seq_cst);
}

void LeasePage::set_room(uint32_t board_device, uint64_t bytes) noexcept {
  if (writable_ && board_device < kBoardDevices)
    layout_->devices[board_device].room.store(bytes, std::memory_order_relaxed);
}

void LeasePage::answer(uint32_t board_device) noexcept {
  if (!writable_ || board_device >= kBoardDevices) return;
  LeaseDevice& device = layout_->devices[board_device];
  device.answers.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(device.answers);
}

int LeasePage::read_only_descriptor() const noexcept {
  return reopen_read_only(fd_);
}

}  // namespace gpulimit::shm
