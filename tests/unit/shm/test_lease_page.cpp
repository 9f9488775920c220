// The tenant's half of memory totals: the lease page the server writes and
// its processes map read-only, and reservations within a lease
// (TenantLedger::reserve_within), racing the server's shrink (S1-S3 of
// limiter-server/model/README.md).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/shm/lease_page.h"
#include "gpulimit/shm/tenant_ledger.h"
#include "gpulimit/testing/temporary_directory.h"

namespace gpulimit::shm {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::array<unsigned char, 16> gpu() {
  std::array<unsigned char, 16> uuid{};
  std::memcpy(uuid.data(), "GPU-lease-test", 14);
  return uuid;
}

TEST(LeasePage, AClientMapsItReadOnlyAndSeesTheServersLeasesAndAnswers) {
  std::string error;
  const std::unique_ptr<LeasePage> server = LeasePage::create(7, error);
  ASSERT_NE(server, nullptr) << error;
  EXPECT_EQ(server->device(3).lease.load(), kNoLeaseLimit);

  const int fd = server->read_only_descriptor();
  ASSERT_GE(fd, 0);
  const std::unique_ptr<LeasePage> client = LeasePage::map_read_only(fd, error);
  ASSERT_NE(client, nullptr) << error;
  EXPECT_EQ(client->layout().header.tenant_number, 7u);

  server->set_lease(3, 512 * kMiB);
  server->answer(3);
  EXPECT_EQ(client->device(3).lease.load(), 512 * kMiB);
  EXPECT_EQ(client->device(3).answers.load(), 1u);
  // The client's writes change nothing: it cannot raise its own lease.
  client->set_lease(3, kNoLeaseLimit);
  EXPECT_EQ(server->device(3).lease.load(), 512 * kMiB);
}

TEST(LeasePage, ItsDescriptorCanBeNeitherMappedWritableNorReopenedForWriting) {
  std::string error;
  const std::unique_ptr<LeasePage> server = LeasePage::create(1, error);
  ASSERT_NE(server, nullptr) << error;
  const int fd = server->read_only_descriptor();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(mmap(nullptr, sizeof(LeaseLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0),
            MAP_FAILED);
  EXPECT_EQ(errno, EACCES);
  // Nor can its size be changed under the server (a shrunk page would turn
  // the server's next store into SIGBUS).
  EXPECT_NE(ftruncate(fd, 0), 0);
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (geteuid() != 0) {  // root passes the mode check
    EXPECT_LT(::open(path.c_str(), O_RDWR | O_CLOEXEC), 0);
    EXPECT_EQ(errno, EACCES);
  }
  ::close(fd);
}

TEST(LeasePage, AnythingButALeasePageIsRefusedInOneLine) {
  const int fd = memfd_create("not-a-page", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, sizeof(LeaseLayout)), 0);
  std::string error;
  EXPECT_EQ(LeasePage::map_read_only(fd, error), nullptr);
  EXPECT_EQ(error, "gpulimitd's lease page is not a gpulimit lease page");
  ::close(fd);
}

class ReserveWithin : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ledger_ = TenantLedger::open(dir_.path(), "leased", error);
    ASSERT_NE(ledger_, nullptr) << error;
    device_ = ledger_->device(gpu().data(), 4096 * kMiB);
    ASSERT_GE(device_, 0);
  }

  gpulimit::testing::TemporaryDirectory dir_;
  std::unique_ptr<TenantLedger> ledger_;
  int device_ = -1;
  std::atomic<uint64_t> lease_{256 * kMiB};
};

TEST_F(ReserveWithin, AReservationWithinTheLeaseIsTakenAndOnePastItTakesNothing) {
  uint64_t need = 0;
  EXPECT_EQ(ledger_->reserve_within(device_, 200 * kMiB, lease_, &need),
            TenantLedger::Reservation::kTaken);
  EXPECT_EQ(ledger_->reserve_within(device_, 100 * kMiB, lease_, &need),
            TenantLedger::Reservation::kOverLease);
  EXPECT_EQ(need, 300 * kMiB);  // what the tenant would use with it
  EXPECT_EQ(ledger_->used(device_), 200 * kMiB);
  EXPECT_EQ(ledger_->held(device_), 200 * kMiB);

  lease_.store(300 * kMiB);  // the server grants the need
  EXPECT_EQ(ledger_->reserve_within(device_, 100 * kMiB, lease_, &need),
            TenantLedger::Reservation::kTaken);
  EXPECT_EQ(ledger_->used(device_), 300 * kMiB);
}

TEST_F(ReserveWithin, TheOwnCapIsCheckedFirstAndALargeLeaseDoesNotLiftIt) {
  lease_.store(kNoLeaseLimit);
  uint64_t need = 0;
  EXPECT_EQ(ledger_->reserve_within(device_, 5000 * kMiB, lease_, &need),
            TenantLedger::Reservation::kOverCap);
  EXPECT_EQ(ledger_->used(device_), 0u);
}

// Threads reserve while a "server" shrinks the lease to what they use, as
// LeaseBook::shrink does: S1 read used, S2 store the lower lease, S3 read
// used again, promise min(old, max(S1, S3)). Whatever the interleaving, the
// tenant ends up holding no more than that promise: a reservation whose CAS
// came before S2 is seen by S3, one after it reads the lower lease.
TEST_F(ReserveWithin, ReservationsRacingAShrinkNeverEndAboveThePromise) {
  constexpr int kRounds = 200;
  constexpr int kThreads = 3;
  for (int round = 0; round < kRounds; ++round) {
    while (ledger_->used(device_) > 0)
      ledger_->release(device_, kMiB);
    const uint64_t old_promise = 4096 * kMiB;
    lease_.store(old_promise);
    std::atomic<bool> go{false};
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&] {
        while (!go.load()) {
        }
        uint64_t need = 0;
        while (!stop.load(std::memory_order_relaxed))
          if (ledger_->reserve_within(device_, kMiB, lease_, &need) !=
              TenantLedger::Reservation::kTaken)
            std::this_thread::yield();
      });
    go.store(true);
    for (int spin = 0; spin < 50 * (round % 7 + 1); ++spin)
      std::this_thread::yield();
    const uint64_t s1 = ledger_->used(device_);
    lease_.store(s1, std::memory_order_seq_cst);
    const uint64_t s3 = ledger_->used(device_);
    const uint64_t promise = std::min(old_promise, std::max(s1, s3));
    for (int spin = 0; spin < 200; ++spin)
      std::this_thread::yield();
    stop.store(true);
    for (std::thread& thread : threads)
      thread.join();
    ASSERT_LE(ledger_->used(device_), promise)
        << "round " << round << ": S1 " << s1 << ", S3 " << s3;
  }
}

}  // namespace
}  // namespace gpulimit::shm
