// The tenant ledger across real processes. Each helper is a ledger_hammer
// process, driven one command at a time; the test process is attached to the
// tenant too and checks the ledger from outside. Timeouts only bound a
// wedged process: no assertion depends on how fast anything runs.
#include "gpulimit/shm/tenant_ledger.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/testing/temporary_directory.h"
#include "hammer_process.h"
#include "test_devices.h"

namespace ledger_test {
namespace {

using gpulimit::shm::ProcessHolding;
using gpulimit::shm::TenantLedger;
using gpulimit::testing::TemporaryDirectory;
using Processes = std::vector<std::unique_ptr<HammerProcess>>;

constexpr char kTenant[] = "job";

class TenantLedgerProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ledger_ = TenantLedger::open(dir_.path(), kTenant, error);
    ASSERT_NE(ledger_, nullptr) << error;
  }

  std::unique_ptr<HammerProcess> start(const std::vector<std::string>& options = {},
                                       const std::string& tenant = kTenant) {
    auto process = std::make_unique<HammerProcess>(dir_.path(), tenant, options);
    EXPECT_NE(process->expect("attached"), "") << "a helper did not attach";
    return process;
  }

  int register_device(int n, uint64_t cap) { return ledger_->device(uuid_of(n).data(), cap); }

  std::string path(const std::string& tenant) const {
    return TenantLedger::path_for(dir_.path(), geteuid(), tenant);
  }

  // The taken slots by pid, as a process other than the helpers sees them.
  std::map<pid_t, ProcessHolding> holdings() const {
    std::map<pid_t, ProcessHolding> by_pid;
    for (const ProcessHolding& holding : ledger_->processes())
      by_pid[holding.pid] = holding;
    return by_pid;
  }

  // Leaves the recount sequence odd and the reaper mutex owned by a dead
  // thread, with a dead process's 200 bytes still counted next to the 300 of
  // the process returned.
  std::unique_ptr<HammerProcess> kill_a_reaper_mid_recount() {
    auto keeper = start();
    EXPECT_EQ(number_in(keeper->ask("reserve 0 300", "reserved"), "ok"), 1u);
    auto victim = start();
    EXPECT_EQ(number_in(victim->ask("reserve 0 200", "reserved"), "ok"), 1u);
    auto reaper = start({"--seam=die-in-recount"});
    victim->kill_now();  // after the reaper attached, which would have reaped it
    EXPECT_EQ(reaper->ask("reap", "recounting"), "recounting");
    reaper->kill_now();
    return keeper;
  }

  Processes churn_under_kills(const std::vector<std::string>& options, const std::vector<int>& devs,
                              uint64_t limit);

  TemporaryDirectory dir_;
  std::unique_ptr<TenantLedger> ledger_;  // the test process is one of the tenant's
};

// Within a lease (memory totals): the lease is a word the test writes in a
// file the helpers map read-only, as a lease page's.
class LeaseWord {
 public:
  explicit LeaseWord(const std::string& path, uint64_t bytes) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, sizeof(uint64_t)), 0);
    void* mapped = mmap(nullptr, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    EXPECT_NE(mapped, MAP_FAILED);
    word_ = static_cast<std::atomic<uint64_t>*>(mapped);
    word_->store(bytes, std::memory_order_seq_cst);
  }
  ~LeaseWord() { munmap(word_, sizeof(uint64_t)); }
  std::string option() const { return "--lease=" + path_; }

 private:
  std::string path_;
  std::atomic<uint64_t>* word_;
};

TEST_F(TenantLedgerProcessesTest, EightProcessesOfFourThreadsRacingTakeExactlyWhatFits) {
  const uint64_t cap = 4ull << 30;
  const uint64_t rest = 400'000'009;
  const uint64_t chunk = 4099;
  const int dev = register_device(0, cap);
  ASSERT_TRUE(ledger_->reserve(dev, cap - rest));
  Processes racers;
  for (int i = 0; i < 8; ++i) {
    racers.push_back(start({"--threads=4"}));
    ASSERT_EQ(racers.back()->ask("race 0 " + std::to_string(chunk), "ready"), "ready");
  }

  for (auto& racer : racers)
    racer->send("go");
  std::map<pid_t, uint64_t> reserved;
  uint64_t total = 0;
  for (auto& racer : racers) {
    const std::string answer = racer->expect("raced");
    ASSERT_NE(answer, "");
    reserved[racer->pid()] = number_in(answer, "reserved");
    total += reserved[racer->pid()];
  }

  EXPECT_EQ(total, rest / chunk * chunk);
  EXPECT_EQ(ledger_->used(dev), cap - rest + total);
  EXPECT_LE(ledger_->used(dev), cap);
  const auto by_pid = holdings();
  for (const auto& [pid, bytes] : reserved)
    EXPECT_EQ(by_pid.at(pid).held[dev], bytes) << "pid " << pid;
  for (auto& racer : racers)
    EXPECT_EQ(racer->exit_now(), 0);
  EXPECT_EQ(ledger_->used(dev), cap - rest);
}

TEST_F(TenantLedgerProcessesTest, RecountsWhileProcessesChurnKeepUsedExact) {
  // Room for everything: a reserve that fails would reap, and so wait for
  // the recount instead of racing with it.
  const uint64_t cap = 1ull << 40;
  const std::vector<int> devs = {register_device(0, cap), register_device(1, cap)};
  Processes helpers;
  for (int i = 0; i < 4; ++i) {
    helpers.push_back(start({"--threads=2", "--devices=2", "--seed=" + std::to_string(i + 1),
                             "--seam=yield-in-flight"}));
    ASSERT_EQ(helpers.back()->ask("churn 262144", "churning"), "churning");
  }

  auto reaper = start({"--seam=sleep-in-recount"});

  // Recounts while everyone reserves and releases: lingering ones from
  // another process, during which reservers must keep out, then quick ones
  // from this process, which would catch an operation in flight if any were
  // miscounted. The last recount decides where used ends: nothing recounts
  // after it to hide a miscount.
  const std::string reaped = reaper->ask("reap 100", "reaped");
  ASSERT_NE(reaped, "");
  int recounts = static_cast<int>(number_in(reaped, "recounts"));
  for (int i = 0; i < 200; ++i) {
    recounts += ledger_->reap() ? 1 : 0;
    // Pacing only, not a bound: the reservers parked by that recount get
    // going again, so that the next one finds some of them in flight.
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  RecordProperty("recounts", recounts);
  // A recount gives up only when a live process stays in flight for its
  // whole bound (100 ms): here that would take reservers that do not make
  // way for it, 300 times over.
  EXPECT_GT(recounts, 0);
  std::map<pid_t, std::vector<uint64_t>> tallies;
  for (auto& helper : helpers) {
    const std::string answer = helper->ask("quiesce", "quiet");
    ASSERT_NE(answer, "");
    tallies[helper->pid()] = numbers_in(answer, "tally");
  }

  const auto by_pid = holdings();
  for (size_t d = 0; d < devs.size(); ++d) {
    uint64_t sum = 0;
    for (const auto& [pid, tally] : tallies) {
      EXPECT_EQ(by_pid.at(pid).held[devs[d]], tally.at(d)) << "pid " << pid;
      sum += tally.at(d);
    }
    EXPECT_EQ(ledger_->used(devs[d]), sum) << "device " << d;
  }
}

// Six helpers churning on `devs` (with `options`), SIGKILLed at random
// instants (in tight reserve/release loops, in reaps of their own,
// anywhere) and replaced so that the pressure stays, for 8 s or 200 kills.
// Then every survivor's tally must be what the ledger says it holds, and
// used exact and within `limit`. Returns the survivors.
Processes TenantLedgerProcessesTest::churn_under_kills(const std::vector<std::string>& options,
                                                       const std::vector<int>& devs,
                                                       uint64_t limit) {
  std::mt19937_64 random(static_cast<uint64_t>(::testing::UnitTest::GetInstance()->random_seed()));
  int started = 0;
  auto start_churning = [&] {
    std::vector<std::string> with_seed = options;
    with_seed.push_back("--seed=" + std::to_string(++started));
    auto process = start(with_seed);
    EXPECT_EQ(process->ask("churn 262144", "churning"), "churning");
    return process;
  };
  Processes helpers;
  for (int i = 0; i < 6; ++i)
    helpers.push_back(start_churning());

  // Kill at random instants, in tight reserve/release loops, in reaps of
  // their own, anywhere; replace each victim so the pressure stays.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  int kills = 0;
  for (; kills < 200 && std::chrono::steady_clock::now() < deadline; ++kills) {
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 15'000));
    auto& victim = helpers[random() % helpers.size()];
    victim->kill_now();
    victim = start_churning();
    if (kills % 4 == 0) ledger_->reap();  // whatever it finds; the final reap is checked
  }
  RecordProperty("kills", kills);

  std::map<pid_t, std::vector<uint64_t>> tallies;
  for (auto& helper : helpers) {
    const std::string answer = helper->ask("quiesce", "quiet");
    EXPECT_NE(answer, "");
    EXPECT_EQ(numbers_in(answer, "tally"), numbers_in(answer, "held")) << answer;
    tallies[helper->pid()] = numbers_in(answer, "tally");
  }
  // The last recount ran while everyone churned: at the last replacement's
  // attach, in a reserve that found no room, or ours. Unless it gave up and
  // left a dead slot, it left used exact, and nothing since may change that.
  const auto before_reap = holdings();
  const bool dead_left = std::any_of(before_reap.begin(), before_reap.end(),
                                     [](const auto& entry) { return !entry.second.live; });
  RecordProperty("dead_slots_left", dead_left ? 1 : 0);
  for (size_t d = 0; d < devs.size() && !dead_left; ++d) {
    uint64_t sum = 0;
    for (const auto& [pid, holding] : before_reap)
      sum += holding.held[devs[d]];
    EXPECT_EQ(ledger_->used(devs[d]), sum) << "device " << d << ", before the final reap";
  }
  EXPECT_TRUE(ledger_->reap());

  const auto by_pid = holdings();
  std::set<pid_t> expected_pids = {getpid()};
  for (auto& helper : helpers)
    expected_pids.insert(helper->pid());
  std::set<pid_t> pids;
  for (const auto& [pid, holding] : by_pid) {
    pids.insert(pid);
    EXPECT_TRUE(holding.live) << "pid " << pid << " is dead but still has a slot";
  }
  EXPECT_EQ(pids, expected_pids);
  for (size_t d = 0; d < devs.size(); ++d) {
    uint64_t sum = 0;
    for (const auto& [pid, holding] : by_pid)
      sum += holding.held[devs[d]];
    EXPECT_EQ(ledger_->used(devs[d]), sum) << "device " << d;
    EXPECT_LE(ledger_->used(devs[d]), limit);
    for (const auto& [pid, tally] : tallies)
      EXPECT_EQ(by_pid.at(pid).held[devs[d]], tally.at(d)) << "pid " << pid;
  }
  return helpers;
}

TEST_F(TenantLedgerProcessesTest, SigkillAtRandomInstantsLeavesTheLedgerExact) {
  const uint64_t cap = 16 << 20;
  const std::vector<int> devs = {register_device(0, cap), register_device(1, cap)};
  Processes helpers =
      churn_under_kills({"--threads=3", "--devices=2", "--seam=yield-in-flight"}, devs, cap);
  ASSERT_FALSE(HasFailure());

  // The survivors can still take everything that is left, and no more.
  const uint64_t room = cap - ledger_->used(devs[0]);
  const std::string filled = helpers[0]->ask("fill 0", "filled");
  EXPECT_EQ(number_in(filled, "ok"), 1u) << filled;
  EXPECT_EQ(number_in(filled, "bytes"), room) << filled;
  EXPECT_EQ(ledger_->used(devs[0]), cap);
  EXPECT_EQ(number_in(helpers[1]->ask("reserve 0 1", "reserved"), "ok", 9), 0u);
  for (auto& helper : helpers)
    EXPECT_EQ(helper->exit_now(), 0);
  EXPECT_EQ(ledger_->used(devs[0]), 0u);
  EXPECT_EQ(ledger_->used(devs[1]), 0u);
}

TEST_F(TenantLedgerProcessesTest, SigkillAtRandomInstantsWithinALeaseLeavesTheLedgerExact) {
  const uint64_t cap = 16 << 20;
  const std::vector<int> devs = {register_device(0, cap), register_device(1, cap)};
  const LeaseWord lease(dir_.path() + "/lease", cap / 4);
  Processes helpers = churn_under_kills(
      {"--threads=3", "--devices=2", "--seam=yield-in-flight", lease.option()}, devs, cap / 4);
  for (auto& helper : helpers)
    EXPECT_EQ(helper->exit_now(), 0);
  EXPECT_EQ(ledger_->used(devs[0]), 0u);
  EXPECT_EQ(ledger_->used(devs[1]), 0u);
}

TEST_F(TenantLedgerProcessesTest, AReaperKilledMidRecountDoesNotWedgeReservers) {
  const int dev = register_device(0, 1000);
  auto keeper = kill_a_reaper_mid_recount();
  ASSERT_EQ(ledger_->used(dev), 500u);

  // 300 + 600 fits only once the dead process's 200 are gone.
  const std::string answer = keeper->ask("reserve 0 600", "reserved");

  EXPECT_EQ(number_in(answer, "ok"), 1u) << "'" << answer << "'";
  EXPECT_EQ(ledger_->used(dev), 900u);
  const auto by_pid = holdings();
  EXPECT_EQ(by_pid.size(), 2u);
  EXPECT_EQ(by_pid.at(keeper->pid()).held[dev], 900u);
  EXPECT_TRUE(ledger_->reap());
  EXPECT_EQ(ledger_->used(dev), 900u);
}

TEST_F(TenantLedgerProcessesTest, AReaperKilledMidRecountDoesNotWedgeNewcomers) {
  const int dev = register_device(0, 1000);
  auto keeper = kill_a_reaper_mid_recount();

  auto newcomer = start();

  EXPECT_EQ(ledger_->used(dev), 300u);
  EXPECT_EQ(holdings().size(), 3u);
  EXPECT_EQ(number_in(newcomer->ask("reserve 0 700", "reserved"), "ok"), 1u);
}

TEST_F(TenantLedgerProcessesTest, AProcessStoppedInFlightDoesNotWedgeAReaper) {
  const int dev = register_device(0, 1000);
  auto stopped = start({"--seam=stop-in-flight"});
  stopped->send("reserve 0 100");
  ASSERT_EQ(stopped->expect("in-flight"), "in-flight");
  ASSERT_TRUE(stopped->wait_until_stopped());

  auto reaping = std::async(std::launch::async, [&] { return ledger_->reap(); });
  if (reaping.wait_for(kAnswerTimeout) != std::future_status::ready) {
    stopped->resume();  // unwedge it, or the test cannot end
    FAIL() << "reap() wedged on a stopped process";
  }

  EXPECT_FALSE(reaping.get()) << "the recount should give up on a process stopped in flight";
  EXPECT_TRUE(ledger_->reserve(dev, 900));  // and reservers go on
  stopped->resume();
  EXPECT_EQ(number_in(stopped->expect("reserved"), "ok"), 1u);
  EXPECT_TRUE(ledger_->reap());
  EXPECT_EQ(ledger_->used(dev), 1000u);
  EXPECT_EQ(holdings().at(stopped->pid()).held[dev], 100u);
}

TEST_F(TenantLedgerProcessesTest, AProcessKilledInFlightIsDroppedWhole) {
  const int dev = register_device(0, 1000);
  auto victim = start({"--seam=stop-in-flight"});
  victim->send("reserve 0 300");
  ASSERT_EQ(victim->expect("in-flight"), "in-flight");
  ASSERT_TRUE(victim->wait_until_stopped());
  victim->kill_now();  // its held is raised, its in-flight count too, used is not

  EXPECT_TRUE(ledger_->reap());

  EXPECT_EQ(ledger_->used(dev), 0u);
  EXPECT_EQ(holdings().size(), 1u);
  EXPECT_TRUE(ledger_->reserve(dev, 1000));
}

TEST_F(TenantLedgerProcessesTest, ProcessesRacingWithinALeaseTakeExactlyTheLease) {
  const int dev = register_device(0, 1000);
  const LeaseWord lease(dir_.path() + "/lease", 600);
  Processes racers;
  for (int i = 0; i < 4; ++i)
    racers.push_back(start({"--threads=2", lease.option()}));
  for (auto& racer : racers)
    EXPECT_EQ(racer->ask("race 0 10", "ready"), "ready");
  for (auto& racer : racers)
    racer->send("go");
  uint64_t reserved = 0;
  for (auto& racer : racers)
    reserved += number_in(racer->expect("raced"), "reserved");

  EXPECT_EQ(reserved, 600u);  // the lease, not the cap
  EXPECT_EQ(ledger_->used(dev), 600u);
}

TEST_F(TenantLedgerProcessesTest, AProcessKilledBetweenItsCasAndItsLeaseCheckIsDroppedWhole) {
  const int dev = register_device(0, 1000);
  const LeaseWord lease(dir_.path() + "/lease", 200);
  auto victim = start({"--seam=stop-at-lease-check", lease.option()});
  victim->send("reserve 0 300");
  ASSERT_EQ(victim->expect("at-lease-check"), "at-lease-check");
  ASSERT_TRUE(victim->wait_until_stopped());
  // Its CAS is done and seen, as the server's second read of used sees it:
  // the reservation past the lease is not undone yet.
  EXPECT_EQ(ledger_->used(dev), 300u);
  victim->kill_now();

  EXPECT_TRUE(ledger_->reap());

  EXPECT_EQ(ledger_->used(dev), 0u);
  EXPECT_EQ(holdings().size(), 1u);
  EXPECT_TRUE(ledger_->reserve(dev, 1000));
}

// Exit codes of the forked child, for what it found wrong.
enum ChildFailure : char {
  kChildOk = 0,
  kStillAttached = 10,
  kAttachFailed,
  kDeviceLost,
  kReserveFailed,
};

// Kills and reaps a forked child however the test ends, so that a failed
// assertion never leaves it waiting.
class ForkedChild {
 public:
  explicit ForkedChild(pid_t pid) : pid_(pid) {}
  ForkedChild(const ForkedChild&) = delete;
  ForkedChild& operator=(const ForkedChild&) = delete;
  ~ForkedChild() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  // The child's wait status, once it has ended.
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_;
};

TEST_F(TenantLedgerProcessesTest, AForkedChildIsANewProcessAndLeavesItsParentsSlotAlone) {
  const int dev = register_device(0, 1000);
  ASSERT_TRUE(ledger_->reserve(dev, 100));
  int ready[2];
  int done[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(done, O_CLOEXEC), 0);

  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    close(done[1]);
    ledger_->after_fork_in_child();  // what the pthread_atfork child handler does
    char found = kChildOk;
    std::string error;
    if (ledger_->attached() || ledger_->reserve(dev, 1))
      found = kStillAttached;
    else if (!ledger_->attach(error))
      found = kAttachFailed;
    else if (ledger_->device(uuid_of(0).data(), 0) != dev)
      found = kDeviceLost;
    else if (!ledger_->reserve(dev, 200))
      found = kReserveFailed;
    [[maybe_unused]] ssize_t io = write(ready[1], &found, 1);
    char byte;
    io = read(done[0], &byte, 1);  // until the parent has looked, or has gone
    _exit(found);                  // without detaching: its slot dies with it
  }
  ASSERT_GT(pid, 0);
  ForkedChild child(pid);
  close(ready[1]);
  close(done[0]);
  char found = -1;
  const ssize_t got = read(ready[0], &found, 1);
  close(ready[0]);
  ASSERT_EQ(got, 1);
  ASSERT_EQ(found, kChildOk);

  // Seen from another open file description, which sees the parent's lock.
  std::string error;
  auto observer = TenantLedger::open(dir_.path(), kTenant, error);
  ASSERT_NE(observer, nullptr) << error;
  std::map<pid_t, uint64_t> held_by_pid;
  auto seen = observer->processes();
  EXPECT_EQ(seen.size(), 3u);  // the parent, the observer (same pid, holding 0), the child
  for (const ProcessHolding& holding : seen) {
    EXPECT_TRUE(holding.live) << "pid " << holding.pid;
    held_by_pid[holding.pid] += holding.held[dev];
  }
  EXPECT_EQ(held_by_pid, (std::map<pid_t, uint64_t>{{getpid(), 100}, {child.pid(), 200}}));
  EXPECT_TRUE(observer->reap());
  EXPECT_EQ(observer->used(dev), 300u);

  close(done[1]);  // lets the child end
  const int status = child.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(observer->reap());

  EXPECT_EQ(observer->used(dev), 100u);
  seen = observer->processes();
  EXPECT_EQ(seen.size(), 2u);
  for (const ProcessHolding& holding : seen)
    EXPECT_TRUE(holding.live && holding.pid == getpid());
  EXPECT_TRUE(ledger_->reserve(dev, 900));
}

TEST_F(TenantLedgerProcessesTest, StaleLedgersAreExactlyThoseWhoseProcessesAllDied) {
  auto alive = start({}, "alive");
  start({}, "killed")->kill_now();
  EXPECT_EQ(start({}, "exited")->exit_now(), 0);
  auto mixed_alive = start({}, "mixed");
  start({}, "mixed")->kill_now();

  const std::vector<std::string> stale = TenantLedger::stale_ledgers(dir_.path(), geteuid());

  EXPECT_EQ(stale, (std::vector<std::string>{path("exited"), path("killed")}));
  EXPECT_FALSE(TenantLedger::remove_if_stale(path("alive")));
  EXPECT_FALSE(TenantLedger::remove_if_stale(path("mixed")));
  EXPECT_FALSE(TenantLedger::remove_if_stale(path(kTenant)));
  EXPECT_TRUE(TenantLedger::remove_if_stale(path("killed")));
  EXPECT_EQ(TenantLedger::stale_ledgers(dir_.path(), geteuid()),
            std::vector<std::string>{path("exited")});
}

}  // namespace
}  // namespace ledger_test
