// The ledger seen from outside its tenant (shm/ledger_inspection.h), as the
// server uses it: recounting a ledger whose process was killed, and reading
// its figures, without ever attaching, creating or blocking.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>

#include "forked_process.h"
#include "gpulimit/shm/ledger_inspection.h"
#include "gpulimit/shm/tenant_ledger.h"
#include "gpulimit/testing/temporary_directory.h"
#include "test_client.h"

namespace server_test {
namespace {

namespace shm = gpulimit::shm;
constexpr uint64_t kMiB = uint64_t{1} << 20;

class LedgerReaping : public ::testing::Test {
 protected:
  std::string path(const std::string& tenant) const {
    return shm::TenantLedger::path_for(dir_.path(), getuid(), tenant);
  }

  // A process of `tenant` that reserves `bytes` on kGpu0, says "reserved",
  // and waits to be killed.
  std::unique_ptr<ForkedProcess> holding(const std::string& tenant, uint64_t bytes) {
    const std::string dir = dir_.path();
    return std::make_unique<ForkedProcess>([=](ParentLine& parent) {
      std::string error;
      auto ledger = shm::TenantLedger::open(dir, tenant, error);
      if (!ledger) return 2;
      const int device = ledger->device(kGpu0.data(), 1024 * kMiB);
      if (device < 0 || !ledger->reserve(device, bytes)) return 3;
      parent.say("reserved");
      for (;;)
        pause();
    });
  }

  gpulimit::testing::TemporaryDirectory dir_;
};

TEST_F(LedgerReaping, GivesBackTheBytesOfAKilledProcess) {
  std::string error;
  auto survivor = shm::TenantLedger::open(dir_.path(), "t", error);
  ASSERT_TRUE(survivor) << error;
  const int device = survivor->device(kGpu0.data(), 1024 * kMiB);
  ASSERT_TRUE(survivor->reserve(device, 10 * kMiB));
  auto victim = holding("t", 300 * kMiB);
  ASSERT_NE(victim->expect("reserved"), "");
  victim->kill_now();
  ASSERT_EQ(survivor->used(device), 310 * kMiB) << "nobody has reaped yet";

  EXPECT_EQ(shm::reap_ledger(path("t"), getuid(), error), shm::LedgerReapOutcome::kReaped) << error;

  EXPECT_EQ(survivor->used(device), 10 * kMiB);
  EXPECT_EQ(survivor->processes().size(), 1u) << "the dead process's slot is free";
}

TEST_F(LedgerReaping, LeavesLiveProcessesAlone) {
  auto live = holding("t", 300 * kMiB);
  ASSERT_NE(live->expect("reserved"), "");
  std::string error;

  EXPECT_EQ(shm::reap_ledger(path("t"), getuid(), error), shm::LedgerReapOutcome::kReaped);

  std::vector<shm::LedgerDeviceUsage> usage;
  ASSERT_TRUE(shm::read_ledger_usage(path("t"), getuid(), usage, error)) << error;
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].used, 300 * kMiB);
  EXPECT_EQ(usage[0].cap, 1024 * kMiB);
  EXPECT_EQ(usage[0].uuid, kGpu0);
}

TEST_F(LedgerReaping, SaysBusyWhileAProcessIsOpeningTheLedgerInsteadOfWaiting) {
  auto live = holding("t", kMiB);
  ASSERT_NE(live->expect("reserved"), "");
  // Openers hold this lock while they attach.
  const int opener = open(path("t").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(opener, 0);
  ASSERT_EQ(flock(opener, LOCK_EX), 0);
  std::string error;

  EXPECT_EQ(shm::reap_ledger(path("t"), getuid(), error), shm::LedgerReapOutcome::kBusy);

  EXPECT_NE(error.find("opening"), std::string::npos) << error;
  close(opener);
}

TEST_F(LedgerReaping, NeverCreatesALedger) {
  std::string error;

  EXPECT_EQ(shm::reap_ledger(path("nobody"), getuid(), error), shm::LedgerReapOutcome::kAbsent);

  std::vector<shm::LedgerDeviceUsage> usage;
  EXPECT_FALSE(shm::read_ledger_usage(path("nobody"), getuid(), usage, error));
  struct stat status {};
  EXPECT_NE(lstat(path("nobody").c_str(), &status), 0);
}

TEST_F(LedgerReaping, RefusesWhatIsNotALedgerOfItsOwner) {
  std::string error;
  std::ofstream(path("text")) << "not a ledger at all, but long enough to be read as one? no.\n";
  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);  // must not block either call
  ASSERT_EQ(mkdir(path("dir").c_str(), 0700), 0);
  ASSERT_EQ(symlink(path("text").c_str(), path("link").c_str()), 0);
  std::vector<shm::LedgerDeviceUsage> usage;

  for (const char* tenant : {"text", "fifo", "dir", "link"}) {
    EXPECT_EQ(shm::reap_ledger(path(tenant), getuid(), error), shm::LedgerReapOutcome::kUnusable)
        << tenant;
    EXPECT_FALSE(shm::read_ledger_usage(path(tenant), getuid(), usage, error)) << tenant;
    EXPECT_NE(error.find(path(tenant)), std::string::npos) << error;
  }
  auto live = holding("t", kMiB);
  ASSERT_NE(live->expect("reserved"), "");
  EXPECT_EQ(shm::reap_ledger(path("t"), getuid() + 1, error), shm::LedgerReapOutcome::kUnusable)
      << "another owner's file";
}

}  // namespace
}  // namespace server_test
