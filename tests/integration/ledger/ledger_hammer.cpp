// One process of a tenant, for the ledger's integration tests. Opens the
// ledger, then obeys one command per line of stdin and answers each with one
// line on stdout, so that a test drives it step by step instead of sleeping.
//
//   ledger_hammer DIR TENANT [--threads=N] [--devices=N] [--seed=N]
//                 [--seam=die-in-recount|stop-in-flight|yield-in-flight|sleep-in-recount|
//                         stop-at-lease-check]
//                 [--lease=FILE]
//
// Commands and answers:
//   race DEV CHUNK  → "ready"; then, after a "go" line, every thread reserves
//                     CHUNK until it no longer fits → "raced reserved=B successes=N"
//   churn MAX       → threads reserve and release random sizes up to MAX on
//                     random devices until "quiesce" → "churning"
//   quiesce         → "quiet tally=B0,B1,.. held=B0,B1,.." (what the threads
//                     counted, and what the ledger says this process holds)
//   reserve DEV B   → "reserved ok=0|1"
//   fill DEV        → reserves all the room left → "filled ok=0|1 bytes=B"
//   reap [N]        → recounts N times (1) → "reaped ok=0|1 recounts=K"
//   exit, or end of input → detaches and exits 0
//
// Seams (gpulimit/shm/test_seams.h): die-in-recount says "recounting" from
// inside a recount and then waits to be killed; stop-in-flight says
// "in-flight" from inside its first reserve and stops itself (SIGSTOP);
// yield-in-flight gives up the CPU in the middle of every reserve and release;
// sleep-in-recount sleeps a millisecond in the middle of every recount;
// stop-at-lease-check says "at-lease-check" from inside its first reserve
// within a lease, after its CAS, and stops itself (SIGSTOP).
//
// --lease=FILE: every reserve is within the lease that the first 8 bytes of
// FILE hold (TenantLedger::reserve_within), as a lease page's word; the
// test writes it.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gpulimit/shm/tenant_ledger.h"
#include "gpulimit/shm/test_seams.h"
#include "test_devices.h"

namespace {

using gpulimit::shm::TenantLedger;
using gpulimit::shm::test_seams::Point;

void say(const std::string& line) {
  const std::string text = line + "\n";
  [[maybe_unused]] const ssize_t written = write(STDOUT_FILENO, text.data(), text.size());
}

void die_in_recount(Point point) {
  if (point != Point::kRecountCounting) return;
  say("recounting");
  for (;;)
    pause();
}

void stop_in_flight(Point point) {
  static std::atomic<bool> stopped{false};
  if (point != Point::kInFlight || stopped.exchange(true)) return;
  say("in-flight");
  raise(SIGSTOP);
}

void stop_at_lease_check(Point point) {
  static std::atomic<bool> stopped{false};
  if (point != Point::kLeaseCheck || stopped.exchange(true)) return;
  say("at-lease-check");
  raise(SIGSTOP);
}

// Widens the moments between the two updates of reserve and release, which a
// recount must never catch a live process in.
void yield_in_flight(Point point) {
  if (point == Point::kInFlight) sched_yield();
}

// Widens the moment in which a recount sums what live processes hold, which
// no live process may be in the middle of reserve or release during.
void sleep_in_recount(Point point) {
  if (point == Point::kRecountCounting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

struct Options {
  std::string dir;
  std::string tenant;
  int threads = 1;
  int devices = 1;
  uint64_t seed = 1;
  std::string seam;
  std::string lease;
};

bool parse_options(int argc, char** argv, Options& options) {
  if (argc < 3) return false;
  options.dir = argv[1];
  options.tenant = argv[2];
  for (int i = 3; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const size_t equals = arg.find('=');
    if (equals == std::string_view::npos) return false;
    const std::string_view name = arg.substr(0, equals);
    const std::string_view value = arg.substr(equals + 1);
    auto number = [&](auto& out) {
      return std::from_chars(value.data(), value.data() + value.size(), out).ec == std::errc();
    };
    if (name == "--threads" && number(options.threads)) continue;
    if (name == "--devices" && number(options.devices)) continue;
    if (name == "--seed" && number(options.seed)) continue;
    if (name == "--seam") {
      options.seam = value;
      continue;
    }
    if (name == "--lease") {
      options.lease = value;
      continue;
    }
    return false;
  }
  return options.threads > 0 && options.devices > 0 && options.devices <= 16;
}

std::string joined(const std::vector<uint64_t>& numbers) {
  std::string text;
  for (size_t i = 0; i < numbers.size(); ++i)
    text += (i ? "," : "") + std::to_string(numbers[i]);
  return text;
}

class Hammer {
 public:
  Hammer(TenantLedger& ledger, const Options& options, const std::atomic<uint64_t>* lease)
      : ledger_(ledger), options_(options), lease_(lease) {
    for (int n = 0; n < options.devices; ++n)
      devices_.push_back(ledger.device(ledger_test::uuid_of(n).data(), 0));
  }

  // A reserve, within the lease when there is one.
  bool take(int device, uint64_t bytes) {
    if (!lease_) return ledger_.reserve(device, bytes);
    uint64_t need = 0;
    return ledger_.reserve_within(device, bytes, *lease_, &need) ==
           TenantLedger::Reservation::kTaken;
  }

  void race(int dev, uint64_t chunk, std::istream& input) {
    std::atomic<bool> go{false};
    std::vector<uint64_t> reserved(static_cast<size_t>(options_.threads), 0);
    std::vector<uint64_t> successes(reserved.size(), 0);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < reserved.size(); ++t) {
      threads.emplace_back([&, t] {
        while (!go.load(std::memory_order_acquire))
          std::this_thread::yield();
        while (take(devices_[dev], chunk)) {
          reserved[t] += chunk;
          ++successes[t];
        }
      });
    }
    say("ready");
    std::string line;
    while (std::getline(input, line) && line != "go") {
    }
    go.store(true, std::memory_order_release);
    for (auto& thread : threads)
      thread.join();
    uint64_t total = 0;
    uint64_t count = 0;
    for (size_t t = 0; t < reserved.size(); ++t) {
      total += reserved[t];
      count += successes[t];
    }
    say("raced reserved=" + std::to_string(total) + " successes=" + std::to_string(count));
  }

  void churn(uint64_t max_bytes) {
    stop_.store(false);
    tallies_.assign(static_cast<size_t>(options_.threads), std::vector<uint64_t>(devices_.size()));
    for (int t = 0; t < options_.threads; ++t)
      churners_.emplace_back([this, t, max_bytes] { churn_thread(t, max_bytes); });
    say("churning");
  }

  void quiesce() {
    stop_.store(true);
    for (auto& thread : churners_)
      thread.join();
    churners_.clear();
    std::vector<uint64_t> tally(devices_.size(), 0);
    std::vector<uint64_t> held(devices_.size(), 0);
    for (size_t d = 0; d < devices_.size(); ++d) {
      for (const auto& thread_tally : tallies_)
        tally[d] += thread_tally[d];
      held[d] = ledger_.held(devices_[d]);
    }
    say("quiet tally=" + joined(tally) + " held=" + joined(held));
  }

  void reserve(int dev, uint64_t bytes) {
    say(std::string("reserved ok=") + (take(devices_[dev], bytes) ? "1" : "0"));
  }

  void fill(int dev) {
    const uint64_t room = ledger_.cap(devices_[dev]) - ledger_.used(devices_[dev]);
    const bool ok = ledger_.reserve(devices_[dev], room);
    say("filled ok=" + std::string(ok ? "1" : "0") + " bytes=" + std::to_string(room));
  }

  bool valid(int dev) const { return dev >= 0 && static_cast<size_t>(dev) < devices_.size(); }

 private:
  // Keeps what it reserved in a list, as an allocator keeps its blocks, and
  // counts it, so that the test can compare with the ledger.
  void churn_thread(int t, uint64_t max_bytes) {
    std::mt19937_64 random(options_.seed * 1000 + static_cast<uint64_t>(t));
    std::vector<std::pair<size_t, uint64_t>> blocks;
    std::vector<uint64_t>& tally = tallies_[static_cast<size_t>(t)];
    while (!stop_.load(std::memory_order_relaxed)) {
      if (blocks.empty() || random() % 2) {
        const size_t d = random() % devices_.size();
        const uint64_t bytes = 1 + random() % max_bytes;
        if (take(devices_[d], bytes)) {
          blocks.emplace_back(d, bytes);
          tally[d] += bytes;
        }
      } else {
        const size_t pick = random() % blocks.size();
        const auto [d, bytes] = blocks[pick];
        ledger_.release(devices_[d], bytes);
        tally[d] -= bytes;
        blocks[pick] = blocks.back();
        blocks.pop_back();
      }
    }
  }

  TenantLedger& ledger_;
  const Options& options_;
  const std::atomic<uint64_t>* lease_;
  std::vector<int> devices_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> churners_;
  std::vector<std::vector<uint64_t>> tallies_;
};

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse_options(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: ledger_hammer DIR TENANT [--threads=N] [--devices=N] [--seed=N] "
                 "[--seam=die-in-recount|stop-in-flight|yield-in-flight|sleep-in-recount|"
                 "stop-at-lease-check] [--lease=FILE]\n");
    return 2;
  }
  if (!options.seam.empty() && options.seam != "die-in-recount" &&
      options.seam != "stop-in-flight" && options.seam != "yield-in-flight" &&
      options.seam != "sleep-in-recount" && options.seam != "stop-at-lease-check")
    return 2;
  const std::atomic<uint64_t>* lease = nullptr;
  if (!options.lease.empty()) {
    const int fd = ::open(options.lease.c_str(), O_RDONLY | O_CLOEXEC);
    void* word =
        fd < 0 ? MAP_FAILED : mmap(nullptr, sizeof(uint64_t), PROT_READ, MAP_SHARED, fd, 0);
    if (word == MAP_FAILED) {
      say("error=cannot map the lease file " + options.lease);
      return 1;
    }
    lease = static_cast<const std::atomic<uint64_t>*>(word);
  }

  std::string error;
  std::unique_ptr<TenantLedger> ledger = TenantLedger::open(options.dir, options.tenant, error);
  if (!ledger) {
    say("error=" + error);
    return 1;
  }
  // Armed once attached: attaching may recount too, and that one is not the
  // test's to stop.
  if (options.seam == "die-in-recount") gpulimit::shm::test_seams::set_handler(die_in_recount);
  if (options.seam == "stop-in-flight") gpulimit::shm::test_seams::set_handler(stop_in_flight);
  if (options.seam == "yield-in-flight") gpulimit::shm::test_seams::set_handler(yield_in_flight);
  if (options.seam == "sleep-in-recount") gpulimit::shm::test_seams::set_handler(sleep_in_recount);
  if (options.seam == "stop-at-lease-check")
    gpulimit::shm::test_seams::set_handler(stop_at_lease_check);
  Hammer hammer(*ledger, options, lease);
  say("attached pid=" + std::to_string(getpid()));

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string command;
    int dev = 0;
    uint64_t bytes = 0;
    words >> command;
    if (command == "exit") break;
    if (command == "quiesce") {
      hammer.quiesce();
    } else if (command == "reap") {
      int times = 1;
      words >> times;
      int recounts = 0;
      for (int i = 0; i < times; ++i)
        recounts += ledger->reap() ? 1 : 0;
      say("reaped ok=" + std::string(recounts == times ? "1" : "0") +
          " recounts=" + std::to_string(recounts));
    } else if (command == "churn" && words >> bytes && bytes > 0) {
      hammer.churn(bytes);
    } else if (command == "race" && words >> dev >> bytes && hammer.valid(dev)) {
      hammer.race(dev, bytes, std::cin);
    } else if (command == "reserve" && words >> dev >> bytes && hammer.valid(dev)) {
      hammer.reserve(dev, bytes);
    } else if (command == "fill" && words >> dev && hammer.valid(dev)) {
      hammer.fill(dev);
    } else {
      say("error=unknown command: " + line);
    }
  }
  hammer.quiesce();
  return 0;
}
