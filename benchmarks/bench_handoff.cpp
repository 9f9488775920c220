// Token handoff latency through the real gpulimitd: from the moment the
// holder releases the token to the moment the next tenant's waiting thread
// wakes holding it (it could launch now).
//
// The benchmark starts gpulimitd in the foreground on a socket in a
// temporary directory, then forks two tenant processes that speak the
// protocol directly (Hello with one made-up GPU, Welcome, the board mapped
// read-only). They pass the token back and forth. In each handoff:
//
//   the waiter has sent Want and sleeps on the device's token word;
//   the holder, once the board shows somebody waiting, holds a little longer
//   (kHold), sends Idle (t_idle), sleeps on the token word until the server
//   revokes (t_revoked), then sends Ack (t_ack: the release);
//   the server releases and grants the waiter, which wakes (t_wake).
//
// The old holder sends its next Want only after the waiter has woken, so
// nothing else runs on the measured path. Timestamps are CLOCK_MONOTONIC,
// written by each process into a shared anonymous mapping; the figures are
// the counters, in microseconds:
//
//   p50_us, p99_us, max_us              t_wake - t_ack: release to the next
//                                       tenant's thread awake with the token
//   idle_p50_us, idle_p99_us, ...       t_wake - t_idle: the whole
//                                       Idle-started handoff (Idle, revoke,
//                                       the holder's wake, Ack, grant, wake)
//   revoke_p50_us, revoke_p99_us        t_revoked - t_idle: Idle to the
//                                       holder awake with the revoke seen
//
// Two variants split the release-to-wake time:
//
//   `spinning_waiter` replaces the waiter's futex sleep by polling the token
//   word: its release-to-wake is about the server's part alone (the Ack
//   read, decided on, the grant written).
//   `observed_futex_waiter` keeps the sleeping waiter, and the old holder
//   polls the token word after its Ack until the grant shows (t_granted):
//   grant_p50_us, grant_p99_us are t_granted - t_ack (the server's part),
//   woken_p50_us, woken_p99_us are t_wake - t_granted (waking the waiter).
//
// A polling process takes a whole core, so on a small machine it also moves
// the others onto the rest, and delays the server whenever they share a
// core (grant_p99_us then reads milliseconds): the variants say where the
// time goes, the `futex_waiter` figures are the handoff as the launch gate
// sees it.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/protocol/messages.h"
#include "gpulimit/shm/board.h"
#include "gpulimit/shm/board_mapping.h"
#include "gpulimit/shm/futex.h"

namespace {

namespace protocol = gpulimit::protocol;
namespace shm = gpulimit::shm;

constexpr int kWarmUp = 50;  // handoffs before the measured ones, not counted
constexpr int kHandoffs = 2000;
constexpr int kTotal = kWarmUp + kHandoffs;
// How long a holder keeps the token once the other tenant waits: long
// enough for the waiter to be asleep when the release comes.
constexpr std::chrono::microseconds kHold{200};
// Bounds only a wedged server or process reaches.
constexpr std::chrono::seconds kDeadline{10};
// Longer than any run: handoffs come from Idle and Ack, never from the end
// of a quantum.
constexpr const char* kQuantumMs = "1000";

constexpr unsigned char kGpu[16] = {0x48, 0x61, 0x6e, 0x64, 0x6f, 0x66, 0x66, 0x2d,
                                    0x62, 0x65, 0x6e, 0x63, 0x68, 0x2d, 0x30, 0x31};

enum class Waiter {
  kFutex,
  kSpin,
  kObservedFutex,  // kFutex, and the old holder polls for the grant
};

int64_t now_ns() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// Shared between the benchmark and its two tenant processes.
struct Shared {
  std::atomic<uint32_t> first_holds;  // 1 once tenant A holds the token
  std::atomic<uint32_t> woken;        // handoffs whose waiter has woken
  std::atomic<uint32_t> failed;
  char error[256];
  int64_t idle_ns[kTotal];
  int64_t revoked_ns[kTotal];
  int64_t ack_ns[kTotal];
  int64_t wake_ns[kTotal];
  int64_t granted_ns[kTotal];  // Waiter::kObservedFutex only
};

class SharedMapping {
 public:
  SharedMapping() {
    void* memory =
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory != MAP_FAILED) shared_ = new (memory) Shared{};
  }
  ~SharedMapping() {
    if (shared_) munmap(shared_, sizeof(Shared));
  }
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;
  Shared* get() const { return shared_; }

 private:
  Shared* shared_ = nullptr;
};

// ---------------------------------------------------------------------------
// gpulimitd

class ServerProcess {
 public:
  ServerProcess() {
    char pattern[] = "/tmp/gpulimit-handoff-XXXXXX";
    if (!mkdtemp(pattern)) return;
    dir_ = pattern;
    const std::string socket = this->socket();
    const std::string log = dir_ + "/gpulimitd.log";
    std::vector<std::string> args = {GPULIMITD_PATH, "--foreground", "--socket",      socket,
                                     "--quantum-ms", kQuantumMs,     "--idle-exit-s", "0",
                                     "--log-level",  "warn"};
    std::vector<char*> argv;
    for (auto& arg : args)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      const int null = open("/dev/null", O_RDWR);
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
      if (log_fd >= 0) dup2(log_fd, STDERR_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (log_fd >= 0) close(log_fd);
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& dir() const { return dir_; }
  std::string socket() const { return dir_ + "/gpulimitd.sock"; }

  bool wait_until_serving() {
    if (pid_ <= 0) return false;
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (std::chrono::steady_clock::now() < deadline) {
      std::string error;
      const int fd = protocol::connect_to(socket(), error);
      if (fd >= 0) {
        close(fd);
        return true;
      }
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  std::string log() const {
    std::ifstream in(dir_ + "/gpulimitd.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
};

// ---------------------------------------------------------------------------
// A tenant process, forked from the benchmark

class Tenant {
 public:
  Tenant(Shared& shared, Waiter waiter) : shared_(shared), waiter_(waiter) {}
  ~Tenant() {
    if (fd_ >= 0) close(fd_);
  }
  Tenant(const Tenant&) = delete;
  Tenant& operator=(const Tenant&) = delete;

  // Connect, Hello, Welcome, the board mapped read-only.
  bool attach(const std::string& socket, const std::string& name, const std::string& ledger_dir) {
    std::string error;
    fd_ = protocol::connect_to(socket, error);
    if (fd_ < 0) return fail(error);
    auto hello = protocol::make<protocol::Hello>();
    std::strncpy(hello.tenant, name.c_str(), sizeof hello.tenant - 1);
    hello.claimed_pid = getpid();
    hello.weight = 1;
    hello.priority = protocol::Priority::kNormal;
    std::strncpy(hello.ledger_dir, ledger_dir.c_str(), sizeof hello.ledger_dir - 1);
    hello.device_count = 1;
    std::memcpy(hello.uuids[0], kGpu, sizeof kGpu);
    if (!protocol::send_message(fd_, &hello, sizeof hello)) return fail("cannot send Hello");
    pollfd ready{fd_, POLLIN, 0};
    if (poll(&ready, 1, static_cast<int>(kDeadline.count() * 1000)) <= 0)
      return fail("no answer to Hello");
    std::vector<unsigned char> answer(protocol::kMaxMessageSize);
    int board_fd = -1;
    const ssize_t got = protocol::receive_message(fd_, answer.data(), answer.size(), &board_fd);
    protocol::Welcome welcome{};
    if (got != static_cast<ssize_t>(sizeof welcome) || board_fd < 0) {
      if (board_fd >= 0) close(board_fd);
      return fail("Hello not welcomed");
    }
    std::memcpy(&welcome, answer.data(), sizeof welcome);
    if (welcome.header.type != protocol::Type::kWelcome) {
      close(board_fd);
      return fail("Hello not welcomed");
    }
    board_ = shm::BoardMapping::map_read_only(board_fd, error);
    if (!board_) {
      close(board_fd);
      return fail(error);
    }
    number_ = welcome.tenant_number;
    device_ = welcome.board_device[0];
    return true;
  }

  bool want() {
    auto message = protocol::make<protocol::Want>();
    message.board_device = device_;
    return protocol::send_message(fd_, &message, sizeof message) || fail("cannot send Want");
  }

  // Until this tenant holds the token (woken from the futex, or polling
  // for kSpin); the token's grant.
  bool wait_until_held(Waiter how) {
    const uint32_t held = shm::token_held(number_);
    const std::atomic<uint32_t>& word = entry().token;
    const int64_t deadline = now_ns() + std::chrono::nanoseconds(kDeadline).count();
    if (how == Waiter::kSpin) {
      for (uint32_t spins = 1;; ++spins) {
        if (word.load(std::memory_order_acquire) == held) break;
        if (spins % 4096 == 0 && now_ns() > deadline) return fail("never granted");
      }
    } else {
      for (;;) {
        const uint32_t seen = word.load(std::memory_order_acquire);
        if (seen == held) break;
        if (now_ns() > deadline) return fail("never granted");
        shm::futex_wait(word, seen, std::chrono::seconds(1));
      }
    }
    grant_ = entry().grant.load(std::memory_order_acquire);
    return true;
  }

  // One handoff of this tenant's, as the holder: waits until the other
  // tenant waits, holds kHold more, then Idle, the revoke, Ack.
  bool release(int handoff) {
    const std::atomic<uint32_t>& word = entry().token;
    const uint32_t held = shm::token_held(number_);
    const int64_t deadline = now_ns() + std::chrono::nanoseconds(kDeadline).count();
    // The server wakes the token word when `waiting` becomes nonzero.
    while (entry().waiting.load(std::memory_order_acquire) == 0) {
      if (now_ns() > deadline) return fail("the other tenant never waited");
      shm::futex_wait(word, held, std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(kHold);

    shared_.idle_ns[handoff] = now_ns();
    auto idle = protocol::make<protocol::Idle>();
    idle.board_device = device_;
    idle.grant = grant_;
    if (!protocol::send_message(fd_, &idle, sizeof idle)) return fail("cannot send Idle");
    const uint32_t revoked = shm::token_revoked(number_);
    for (;;) {
      const uint32_t seen = word.load(std::memory_order_acquire);
      if (seen == revoked) break;
      if (seen != held) return fail("the token went elsewhere without a revoke");
      if (now_ns() > deadline) return fail("Idle never revoked");
      shm::futex_wait(word, seen, std::chrono::seconds(1));
    }
    shared_.revoked_ns[handoff] = now_ns();

    auto ack = protocol::make<protocol::Ack>();
    ack.board_device = device_;
    ack.grant = grant_;
    shared_.ack_ns[handoff] = now_ns();
    if (!protocol::send_message(fd_, &ack, sizeof ack)) return fail("cannot send Ack");
    if (waiter_ == Waiter::kObservedFutex) {
      for (uint32_t spins = 1;; ++spins) {
        const uint32_t seen = word.load(std::memory_order_acquire);
        if (seen != revoked && seen != 0) break;
        if (spins % 4096 == 0 && now_ns() > deadline) return fail("the grant never showed");
      }
      shared_.granted_ns[handoff] = now_ns();
    }

    // Out of the way until the other tenant has woken.
    for (;;) {
      const uint32_t woken = shared_.woken.load(std::memory_order_acquire);
      if (woken > static_cast<uint32_t>(handoff)) break;
      if (now_ns() > deadline) return fail("the other tenant never woke");
      shm::futex_wait(shared_.woken, woken, std::chrono::seconds(1));
    }
    return true;
  }

  // One handoff to this tenant, as the waiter (its Want already sent).
  bool take(int handoff) {
    if (!wait_until_held(waiter_ == Waiter::kSpin ? Waiter::kSpin : Waiter::kFutex)) return false;
    shared_.wake_ns[handoff] = now_ns();
    shared_.woken.store(static_cast<uint32_t>(handoff) + 1, std::memory_order_release);
    shm::futex_wake_all(shared_.woken);
    return true;
  }

  bool fail(const std::string& why) {
    if (shared_.failed.exchange(1) == 0)
      std::snprintf(shared_.error, sizeof shared_.error, "pid %d: %s", static_cast<int>(getpid()),
                    why.c_str());
    return false;
  }

 private:
  const shm::BoardDevice& entry() const { return board_->layout().devices[device_]; }

  Shared& shared_;
  Waiter waiter_;
  int fd_ = -1;
  std::unique_ptr<shm::BoardMapping> board_;
  uint32_t number_ = 0;
  uint32_t device_ = 0;
  uint32_t grant_ = 0;
};

// Tenant `role` (0: A, which holds first; 1: B) through every handoff.
// Handoff k goes from tenant k % 2 to the other.
int run_tenant(int role, Shared& shared, Waiter waiter, const std::string& socket,
               const std::string& ledger_dir) {
  Tenant tenant(shared, waiter);
  if (!tenant.attach(socket, role == 0 ? "handoff-a" : "handoff-b", ledger_dir)) return 1;
  if (!tenant.want()) return 1;
  if (role == 0) {
    if (!tenant.wait_until_held(Waiter::kFutex)) return 1;
    shared.first_holds.store(1, std::memory_order_release);
  }
  for (int k = 0; k < kTotal; ++k) {
    if (shared.failed.load(std::memory_order_relaxed)) return 1;
    if (k % 2 == role) {
      if (!tenant.release(k)) return 1;
      if (k + 1 < kTotal && !tenant.want()) return 1;
    } else {
      if (!tenant.take(k)) return 1;
    }
  }
  return 0;
}

pid_t fork_tenant(int role, Shared& shared, Waiter waiter, const ServerProcess& server) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    _exit(run_tenant(role, shared, waiter, server.socket(), server.dir()));
  }
  return pid;
}

int wait_for_child(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct Percentiles {
  double p50_us = 0;
  double p99_us = 0;
  double max_us = 0;
};

// Nearest rank.
Percentiles percentiles(std::vector<int64_t> ns) {
  std::sort(ns.begin(), ns.end());
  const auto rank = [&](double p) {
    const auto index = static_cast<std::size_t>(p * static_cast<double>(ns.size()) + 0.999999);
    return static_cast<double>(ns[std::min(ns.size(), std::max<std::size_t>(index, 1)) - 1]) /
           1000.0;
  };
  return Percentiles{rank(0.50), rank(0.99), static_cast<double>(ns.back()) / 1000.0};
}

void BM_TokenHandoff(benchmark::State& state, Waiter waiter) {
  for (auto _ : state) {
    SharedMapping mapping;
    if (!mapping.get()) {
      state.SkipWithError("cannot map shared memory");
      return;
    }
    Shared& shared = *mapping.get();
    ServerProcess server;
    if (!server.wait_until_serving()) {
      state.SkipWithError(("gpulimitd did not start: " + server.log()).c_str());
      return;
    }
    const pid_t a = fork_tenant(0, shared, waiter, server);
    const int64_t deadline = now_ns() + std::chrono::nanoseconds(kDeadline).count();
    while (shared.first_holds.load(std::memory_order_acquire) == 0 &&
           shared.failed.load(std::memory_order_relaxed) == 0 && now_ns() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const pid_t b = fork_tenant(1, shared, waiter, server);
    // Every wait in the tenants has a deadline: they exit by themselves.
    const int status_a = wait_for_child(a);
    const int status_b = wait_for_child(b);
    if (status_a != 0 || status_b != 0 || shared.failed.load()) {
      const std::string error =
          std::string("tenant failed: ") + shared.error + "; gpulimitd: " + server.log();
      state.SkipWithError(error.c_str());
      return;
    }

    std::vector<int64_t> release_to_wake;
    std::vector<int64_t> idle_to_wake;
    std::vector<int64_t> idle_to_revoked;
    std::vector<int64_t> release_to_granted;
    std::vector<int64_t> granted_to_wake;
    for (int k = kWarmUp; k < kTotal; ++k) {
      release_to_wake.push_back(shared.wake_ns[k] - shared.ack_ns[k]);
      idle_to_wake.push_back(shared.wake_ns[k] - shared.idle_ns[k]);
      idle_to_revoked.push_back(shared.revoked_ns[k] - shared.idle_ns[k]);
      release_to_granted.push_back(shared.granted_ns[k] - shared.ack_ns[k]);
      granted_to_wake.push_back(shared.wake_ns[k] - shared.granted_ns[k]);
    }
    const Percentiles release = percentiles(release_to_wake);
    const Percentiles idle = percentiles(idle_to_wake);
    const Percentiles revoke = percentiles(idle_to_revoked);
    state.counters["p50_us"] = release.p50_us;
    state.counters["p99_us"] = release.p99_us;
    state.counters["max_us"] = release.max_us;
    state.counters["idle_p50_us"] = idle.p50_us;
    state.counters["idle_p99_us"] = idle.p99_us;
    state.counters["idle_max_us"] = idle.max_us;
    state.counters["revoke_p50_us"] = revoke.p50_us;
    state.counters["revoke_p99_us"] = revoke.p99_us;
    if (waiter == Waiter::kObservedFutex) {
      const Percentiles granted = percentiles(release_to_granted);
      const Percentiles woken = percentiles(granted_to_wake);
      state.counters["grant_p50_us"] = granted.p50_us;
      state.counters["grant_p99_us"] = granted.p99_us;
      state.counters["woken_p50_us"] = woken.p50_us;
      state.counters["woken_p99_us"] = woken.p99_us;
    }
    state.counters["handoffs"] = kHandoffs;
  }
}
BENCHMARK_CAPTURE(BM_TokenHandoff, futex_waiter, Waiter::kFutex)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TokenHandoff, spinning_waiter, Waiter::kSpin)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TokenHandoff, observed_futex_waiter, Waiter::kObservedFutex)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
