#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <latch>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/shm/tenant_ledger.h"
#include "gpulimit/testing/temporary_directory.h"

namespace gpulimit::shm {
namespace {

using Uuid = std::array<unsigned char, 16>;

Uuid uuid_of(int n) {
  Uuid uuid{};
  std::memcpy(uuid.data(), "GPU-ledger-test", 15);
  uuid[15] = static_cast<unsigned char>(n);
  return uuid;
}

using gpulimit::testing::TemporaryDirectory;

// The fields every layout version starts with, as they lie in the file.
struct FileHeader {
  char magic[8];
  uint32_t layout_version;
  uint32_t layout_size;
};

class TenantLedgerTest : public ::testing::Test {
 protected:
  std::unique_ptr<TenantLedger> open_ledger(const std::string& tenant = "job") {
    std::string error;
    std::unique_ptr<TenantLedger> ledger = TenantLedger::open(dir_.path(), tenant, error);
    EXPECT_NE(ledger, nullptr) << error;
    return ledger;
  }

  std::string refused(const std::string& tenant = "job") {
    std::string error;
    EXPECT_EQ(TenantLedger::open(dir_.path(), tenant, error), nullptr);
    return error;
  }

  std::string path(const std::string& tenant = "job") const {
    return TenantLedger::path_for(dir_.path(), geteuid(), tenant);
  }

  FileHeader read_header(const std::string& tenant = "job") const {
    FileHeader header{};
    const int fd = ::open(path(tenant).c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(pread(fd, &header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
    close(fd);
    return header;
  }

  void overwrite(const void* bytes, size_t size, off_t offset) const {
    const int fd = ::open(path().c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, bytes, size, offset), static_cast<ssize_t>(size));
    close(fd);
  }

  void resize(off_t size) const { ASSERT_EQ(truncate(path().c_str(), size), 0); }

  off_t file_size() const {
    struct stat status {};
    EXPECT_EQ(stat(path().c_str(), &status), 0);
    return status.st_size;
  }

  // What "one process" ends up as when it is killed: its liveness lock goes
  // with its file description, and its slot stays as it was.
  static void simulate_death(TenantLedger& ledger) { ledger.after_fork_in_child(); }

  TemporaryDirectory dir_;
};

TEST_F(TenantLedgerTest, CreatesAVersionedFileNamedForTheUserAndTenant) {
  auto sut = open_ledger();

  const FileHeader header = read_header();
  EXPECT_EQ(std::string(header.magic, sizeof header.magic), "gpulimLD");
  EXPECT_EQ(header.layout_version, 2u);
  EXPECT_EQ(file_size(), static_cast<off_t>(header.layout_size));
  EXPECT_EQ(sut->path(), dir_.path() + "/gpulimit-" + std::to_string(geteuid()) + "-job.ledger");
  struct stat status {};
  ASSERT_EQ(stat(path().c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);
}

TEST_F(TenantLedgerTest, RefusesAnotherLayoutVersionThatProcessesUse) {
  auto attached = open_ledger();
  const uint32_t other_version = 3;
  overwrite(&other_version, sizeof other_version, offsetof(FileHeader, layout_version));

  const std::string error = refused();

  EXPECT_NE(error.find(path()), std::string::npos) << error;
  EXPECT_NE(error.find("layout version 3"), std::string::npos) << error;
  EXPECT_NE(error.find("uses version 2"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

TEST_F(TenantLedgerTest, RebuildsAnotherLayoutVersionThatNoProcessUses) {
  open_ledger().reset();
  const uint32_t other_version = 1;
  overwrite(&other_version, sizeof other_version, offsetof(FileHeader, layout_version));

  auto sut = open_ledger();

  ASSERT_NE(sut, nullptr);
  EXPECT_EQ(read_header().layout_version, 2u);
  EXPECT_TRUE(sut->attached());
}

TEST_F(TenantLedgerTest, RefusesADamagedFileThatProcessesUse) {
  auto attached = open_ledger();
  const off_t size = file_size();

  overwrite("garbage!", 8, 0);
  EXPECT_NE(refused().find("is not a gpulimit ledger"), std::string::npos);
  overwrite("gpulimLD", 8, 0);

  const uint32_t wrong_size = 12345;
  overwrite(&wrong_size, sizeof wrong_size, offsetof(FileHeader, layout_size));
  EXPECT_NE(refused().find("is damaged"), std::string::npos);
  const uint32_t right_size = static_cast<uint32_t>(size);
  overwrite(&right_size, sizeof right_size, offsetof(FileHeader, layout_size));

  resize(4096);  // the header and the mutex survive; the attached process stays safe
  const std::string error = refused();
  EXPECT_NE(error.find("is damaged"), std::string::npos);
  EXPECT_NE(error.find(path()), std::string::npos);
  resize(size);
}

TEST_F(TenantLedgerTest, RebuildsADamagedFileThatNoProcessUses) {
  open_ledger().reset();
  const std::vector<char> garbage(static_cast<size_t>(file_size()), '\x5a');
  overwrite(garbage.data(), garbage.size(), 0);

  auto sut = open_ledger();

  ASSERT_NE(sut, nullptr);
  EXPECT_EQ(sut->device_count(), 0u);
  const int dev = sut->device(uuid_of(0).data(), 100);
  EXPECT_TRUE(sut->reserve(dev, 100));
}

TEST_F(TenantLedgerTest, RebuildsAShortFileThatNoProcessUses) {
  open_ledger().reset();
  resize(7);

  EXPECT_NE(open_ledger(), nullptr);
}

TEST_F(TenantLedgerTest, NobodyAttachedMeansFreshCaps) {
  auto first_job = open_ledger();
  first_job->device(uuid_of(0).data(), 1000);
  first_job.reset();

  auto sut = open_ledger();
  const int dev = sut->device(uuid_of(0).data(), 5000);

  EXPECT_EQ(sut->cap(dev), 5000u);
}

TEST_F(TenantLedgerTest, RefusesAFileOfAnotherUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  open_ledger().reset();
  ASSERT_EQ(chown(path().c_str(), 12345, 12345), 0);

  const std::string error = refused();

  EXPECT_NE(error.find("belongs to uid 12345"), std::string::npos) << error;
}

TEST_F(TenantLedgerTest, RefusesASymlinkInPlaceOfTheFile) {
  const std::string target = dir_.path() + "/target";
  ASSERT_EQ(symlink(target.c_str(), path().c_str()), 0);

  EXPECT_NE(refused().find(path()), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(target));
}

TEST_F(TenantLedgerTest, RefusesTenantIdsThatAreNotPlainNames) {
  for (const std::string& bad :
       std::vector<std::string>{"", "a/b", "a b", "x\ny", "caf\xc3\xa9", std::string(65, 'a')}) {
    const std::string error = refused(bad);
    EXPECT_NE(error.find("tenant id"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  EXPECT_NE(open_ledger("torch_run-7.rank.0"), nullptr);
}

TEST_F(TenantLedgerTest, DevicesAreKeyedByUuidAndTheFirstCapStays) {
  auto sut = open_ledger();
  auto other_process = open_ledger();

  EXPECT_EQ(sut->device(uuid_of(0).data(), 1000), 0);
  EXPECT_EQ(sut->device(uuid_of(1).data(), 2000), 1);
  EXPECT_EQ(sut->device(uuid_of(0).data(), 5), 0);
  EXPECT_EQ(other_process->device(uuid_of(1).data(), 7), 1);
  EXPECT_EQ(other_process->device(uuid_of(2).data(), 3000), 2);
  EXPECT_EQ(sut->device(uuid_of(2).data(), 1), 2);

  EXPECT_EQ(sut->cap(0), 1000u);
  EXPECT_EQ(other_process->cap(1), 2000u);
  EXPECT_EQ(sut->cap(2), 3000u);
  EXPECT_EQ(sut->device_count(), 3u);
}

TEST_F(TenantLedgerTest, TheDeviceTableHoldsSixteen) {
  auto sut = open_ledger();
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(sut->device(uuid_of(i).data(), 100), i);

  EXPECT_EQ(sut->device(uuid_of(16).data(), 100), -1);
  EXPECT_EQ(sut->device(uuid_of(9).data(), 100), 9);
  EXPECT_EQ(sut->device_count(), 16u);
}

TEST_F(TenantLedgerTest, ReserveAndReleaseAreExactUpToTheCap) {
  auto sut = open_ledger();
  auto other_process = open_ledger();
  const int dev = sut->device(uuid_of(0).data(), 1000);

  EXPECT_TRUE(sut->reserve(dev, 600));
  EXPECT_FALSE(other_process->reserve(dev, 401));
  EXPECT_TRUE(other_process->reserve(dev, 400));
  EXPECT_FALSE(sut->reserve(dev, 1));
  EXPECT_EQ(sut->used(dev), 1000u);
  EXPECT_EQ(sut->held(dev), 600u);
  EXPECT_EQ(other_process->held(dev), 400u);

  sut->release(dev, 600);
  EXPECT_EQ(other_process->used(dev), 400u);
  EXPECT_EQ(sut->held(dev), 0u);
  EXPECT_TRUE(sut->reserve(dev, 600));
  EXPECT_FALSE(sut->reserve(dev, UINT64_MAX));  // no wrap-around past the cap
  sut->release(dev, 600);
  other_process->release(dev, 400);
  EXPECT_EQ(sut->used(dev), 0u);
  EXPECT_TRUE(sut->reserve(dev, 0));
}

TEST_F(TenantLedgerTest, RefusesDevicesThatAreNotRegistered) {
  auto sut = open_ledger();
  sut->device(uuid_of(0).data(), 1000);

  EXPECT_FALSE(sut->reserve(1, 1));
  EXPECT_FALSE(sut->reserve(-1, 1));
  sut->release(1, 1);
  EXPECT_EQ(sut->used(1), 0u);
  EXPECT_EQ(sut->cap(-1), 0u);
}

// Threads reserve their own chunk size until it no longer fits, all at once.
// Returns what each thread got.
std::vector<uint64_t> race_for_the_rest(const std::vector<TenantLedger*>& processes, int dev,
                                        int threads_per_process,
                                        const std::vector<uint64_t>& chunks) {
  const size_t threads = processes.size() * static_cast<size_t>(threads_per_process);
  std::vector<uint64_t> got(threads, 0);
  std::latch start(static_cast<std::ptrdiff_t>(threads));
  std::vector<std::thread> racers;
  for (size_t t = 0; t < threads; ++t) {
    racers.emplace_back([&, t] {
      TenantLedger& ledger = *processes[t % processes.size()];
      const uint64_t chunk = chunks[t % chunks.size()];
      start.arrive_and_wait();
      while (ledger.reserve(dev, chunk))
        got[t] += chunk;
    });
  }
  for (auto& racer : racers)
    racer.join();
  return got;
}

TEST_F(TenantLedgerTest, ThirtyTwoThreadsRacingForTheLastBytesTakeExactlyWhatFits) {
  auto sut = open_ledger();
  const uint64_t cap = 500'000'017;
  const int dev = sut->device(uuid_of(0).data(), cap);
  const uint64_t rest = 100'000'007;
  ASSERT_TRUE(sut->reserve(dev, cap - rest));
  const uint64_t chunk = 4099;

  const std::vector<uint64_t> got = race_for_the_rest({sut.get()}, dev, 32, {chunk});

  const uint64_t total = std::accumulate(got.begin(), got.end(), uint64_t{0});
  EXPECT_EQ(total, rest / chunk * chunk);
  EXPECT_EQ(sut->used(dev), cap - rest + total);
  EXPECT_EQ(sut->held(dev), sut->used(dev));
}

TEST_F(TenantLedgerTest, RacersOfSeveralProcessesAndSizesLeaveLessThanAnyChunk) {
  std::vector<std::unique_ptr<TenantLedger>> owned;
  std::vector<TenantLedger*> processes;
  for (int p = 0; p < 4; ++p) {
    owned.push_back(open_ledger());
    processes.push_back(owned.back().get());
  }
  const uint64_t cap = 100'000'017;
  const int dev = processes[0]->device(uuid_of(0).data(), cap);
  const std::vector<uint64_t> chunks = {4096, 1000, 65536, 777, 12289, 61, 100'000, 5000};

  const std::vector<uint64_t> got = race_for_the_rest(processes, dev, 8, chunks);

  const uint64_t total = std::accumulate(got.begin(), got.end(), uint64_t{0});
  const uint64_t used = processes[0]->used(dev);
  EXPECT_EQ(used, total);
  EXPECT_LE(used, cap);
  // Each racer stopped only once its own chunk no longer fitted.
  EXPECT_LT(cap - used, *std::min_element(chunks.begin(), chunks.end()));
  uint64_t held = 0;
  for (TenantLedger* process : processes)
    held += process->held(dev);
  EXPECT_EQ(held, used);

  for (size_t t = 0; t < got.size(); ++t)
    processes[t % processes.size()]->release(dev, got[t]);
  EXPECT_EQ(processes[0]->used(dev), 0u);
  EXPECT_TRUE(processes[1]->reserve(dev, cap));
}

TEST_F(TenantLedgerTest, RecountsWhileThreadsReserveAndReleaseStayExact) {
  auto first = open_ledger();
  auto second = open_ledger();
  const uint64_t cap = 1 << 20;
  const int dev0 = first->device(uuid_of(0).data(), cap);
  const int dev1 = first->device(uuid_of(1).data(), cap);
  ASSERT_EQ(second->device(uuid_of(1).data(), cap), dev1);
  constexpr int kThreads = 8;
  constexpr int kOperations = 100'000;
  std::array<std::array<uint64_t, 2>, kThreads> tallies{};
  std::atomic<int> running{kThreads};
  std::latch start(kThreads + 1);

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      TenantLedger& ledger = t % 2 ? *second : *first;
      std::mt19937_64 random(static_cast<uint64_t>(t));
      std::vector<std::pair<int, uint64_t>> taken;
      start.arrive_and_wait();
      for (int i = 0; i < kOperations; ++i) {
        if (taken.empty() || random() % 2) {
          const int dev = random() % 2 ? dev0 : dev1;
          const uint64_t bytes = 1 + random() % 8192;
          if (ledger.reserve(dev, bytes)) {
            taken.emplace_back(dev, bytes);
            tallies[t][dev] += bytes;
          }
        } else {
          const size_t pick = random() % taken.size();
          ledger.release(taken[pick].first, taken[pick].second);
          tallies[t][taken[pick].first] -= taken[pick].second;
          taken[pick] = taken.back();
          taken.pop_back();
        }
      }
      running.fetch_sub(1);
    });
  }
  // Reaps only while every worker still runs: a recount that miscounted
  // an operation in flight leaves used off by its bytes from then on, and
  // no later recount comes to hide it.
  std::thread reaper([&] {
    start.arrive_and_wait();
    while (running.load() == kThreads) {
      first->reap();
      second->reap();
    }
  });
  for (auto& thread : threads)
    thread.join();
  reaper.join();

  for (const int dev : {dev0, dev1}) {
    uint64_t first_tally = 0;
    uint64_t second_tally = 0;
    for (int t = 0; t < kThreads; ++t)
      (t % 2 ? second_tally : first_tally) += tallies[t][dev];
    EXPECT_EQ(first->held(dev), first_tally);
    EXPECT_EQ(second->held(dev), second_tally);
    EXPECT_EQ(first->used(dev), first_tally + second_tally);
    EXPECT_LE(first->used(dev), cap);
  }
}

TEST_F(TenantLedgerTest, ReapGivesBackWhatADeadProcessHeld) {
  auto sut = open_ledger();
  auto doomed = open_ledger();
  const int dev = sut->device(uuid_of(0).data(), 1000);
  ASSERT_TRUE(sut->reserve(dev, 100));
  ASSERT_TRUE(doomed->reserve(dev, 700));
  simulate_death(*doomed);
  const std::vector<ProcessHolding> before = sut->processes();
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(std::count_if(before.begin(), before.end(), [](const auto& p) { return p.live; }), 1);

  EXPECT_TRUE(sut->reap());

  EXPECT_EQ(sut->used(dev), 100u);
  const std::vector<ProcessHolding> left = sut->processes();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_TRUE(left[0].live);
  EXPECT_EQ(left[0].pid, getpid());
  EXPECT_EQ(left[0].held[dev], 100u);
}

TEST_F(TenantLedgerTest, AReserveThatFindsNoRoomReapsTheDead) {
  auto sut = open_ledger();
  auto doomed = open_ledger();
  const int dev = sut->device(uuid_of(0).data(), 1000);
  ASSERT_TRUE(doomed->reserve(dev, 1000));
  simulate_death(*doomed);

  EXPECT_TRUE(sut->reserve(dev, 1000));
  EXPECT_EQ(sut->used(dev), 1000u);
  EXPECT_FALSE(sut->reserve(dev, 1));
}

TEST_F(TenantLedgerTest, AttachReapsTheDead) {
  auto sut = open_ledger();
  auto doomed = open_ledger();
  const int dev = sut->device(uuid_of(0).data(), 1000);
  ASSERT_TRUE(doomed->reserve(dev, 400));
  simulate_death(*doomed);

  auto newcomer = open_ledger();

  EXPECT_EQ(newcomer->used(dev), 0u);
  EXPECT_EQ(sut->processes().size(), 2u);
}

TEST_F(TenantLedgerTest, DetachGivesBackAndAttachStartsAfresh) {
  auto sut = open_ledger();
  auto other_process = open_ledger();
  const int dev = sut->device(uuid_of(0).data(), 1000);
  ASSERT_TRUE(sut->reserve(dev, 300));
  ASSERT_TRUE(other_process->reserve(dev, 200));

  sut->detach();

  EXPECT_FALSE(sut->attached());
  EXPECT_EQ(other_process->used(dev), 200u);
  EXPECT_EQ(other_process->processes().size(), 1u);
  EXPECT_FALSE(sut->reserve(dev, 1));
  sut->release(dev, 300);
  EXPECT_EQ(other_process->used(dev), 200u);

  std::string error;
  ASSERT_TRUE(sut->attach(error)) << error;
  EXPECT_EQ(sut->device(uuid_of(0).data(), 1), dev);
  EXPECT_EQ(sut->held(dev), 0u);
  EXPECT_TRUE(sut->reserve(dev, 800));
  EXPECT_EQ(other_process->used(dev), 1000u);
}

TEST_F(TenantLedgerTest, AfterForkInChildTheCopyIsDetachedAndCanAttachAgain) {
  auto sut = open_ledger();
  const int dev = sut->device(uuid_of(0).data(), 1000);
  ASSERT_TRUE(sut->reserve(dev, 100));

  sut->after_fork_in_child();

  EXPECT_FALSE(sut->attached());
  EXPECT_FALSE(sut->reserve(dev, 1));
  EXPECT_EQ(sut->device(uuid_of(0).data(), 1), -1);
  std::string error;
  ASSERT_TRUE(sut->attach(error)) << error;
  EXPECT_EQ(sut->device(uuid_of(0).data(), 1), dev);
  EXPECT_EQ(sut->held(dev), 0u);
}

TEST_F(TenantLedgerTest, RefusesTheProcessAfterAllSlotsAreTaken) {
  std::vector<std::unique_ptr<TenantLedger>> processes;
  for (uint32_t i = 0; i < kMaxProcesses; ++i) {
    processes.push_back(open_ledger());
    ASSERT_NE(processes.back(), nullptr);
  }

  const std::string error = refused();

  EXPECT_NE(error.find("all 256 process slots"), std::string::npos) << error;
  simulate_death(*processes[17]);
  EXPECT_NE(open_ledger(), nullptr);
}

TEST_F(TenantLedgerTest, StaleLedgersAreThoseNoProcessIsAttachedTo) {
  auto alive = open_ledger("alive");
  open_ledger("detached").reset();
  auto dead = open_ledger("dead");
  simulate_death(*dead);
  open_ledger("opening").reset();
  const int opening = ::open(path("opening").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_EQ(flock(opening, LOCK_EX), 0);  // as an opener holds it while it attaches
  const std::string uid = std::to_string(geteuid());
  const std::string other_uid = std::to_string(geteuid() + 1);
  for (const std::string& junk : std::vector<std::string>{
           "gpulimit-" + uid + "-x.txt", "gpulimit-" + other_uid + "-x.ledger", "other.ledger"})
    close(::open((dir_.path() + "/" + junk).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));

  const std::vector<std::string> stale = TenantLedger::stale_ledgers(dir_.path(), geteuid());

  EXPECT_EQ(stale, (std::vector<std::string>{path("dead"), path("detached")}));
  EXPECT_FALSE(TenantLedger::remove_if_stale(path("alive")));
  EXPECT_FALSE(TenantLedger::remove_if_stale(path("opening")));
  EXPECT_TRUE(TenantLedger::remove_if_stale(path("dead")));
  EXPECT_FALSE(std::filesystem::exists(path("dead")));
  EXPECT_TRUE(std::filesystem::exists(path("alive")));
  close(opening);
}

}  // namespace
}  // namespace gpulimit::shm
