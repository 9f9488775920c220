// libgpulimit.so's launch gate against a stand-in gpulimitd whose token words
// the test moves by hand: a probe program (gate_probe.cpp) or the spinner
// workload, preloaded with the library on the simulated driver. The
// simulator's kernel trace is the ground truth for when kernels ran.
//
// "Blocked" is judged by an answer that does not come within kBlocked; every
// positive wait is generous, for a small and busy test machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/shm/board.h"
#include "gpulimit/testing/simulated_machine.h"
#include "gpulimit/testing/stand_in_server.h"
#include "gpulimit/testing/temporary_directory.h"
#include "probe_process.h"

namespace gate_test {
namespace {

using namespace std::chrono_literals;
using gpulimit::protocol::Type;
using gpulimit::testing::MachineShape;
using gpulimit::testing::monotonic_ns;
using gpulimit::testing::Received;
using gpulimit::testing::SimulatedMachine;
using gpulimit::testing::StandInServer;
using gpulimit::testing::TracedKernel;
using gpulimit::testing::with;

constexpr auto kBlocked = 300ms;
constexpr auto kSoon = 20s;
constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kOtherTenant = 99;  // holds the token while the probe must wait
// ThreadSanitizer's runtime starts a thread of its own at a process's first
// pthread_create: a probe that starts threads has one more.
#if defined(GPULIMIT_THREAD_SANITIZER)
constexpr int kSanitizerThreads = 1;
#else
constexpr int kSanitizerThreads = 0;
#endif

class LaunchGate : public testing::Test {
 protected:
  std::string socket_path() const { return directory_.path() + "/gpulimitd.sock"; }

  // A server of `devices` devices on which the probe's tenant is number 1.
  StandInServer& start_server(uint32_t devices = 1, uint32_t quantum_us = 4000) {
    server_ = std::make_unique<StandInServer>(socket_path(), devices, quantum_us);
    EXPECT_EQ(server_->tenant_number("probe"), 1u);
    return *server_;
  }

  Environment environment(uint32_t devices = 1, bool gated = true) const {
    Environment env = with(machine_.environment(), "FAKECUDA_DEVICES", std::to_string(devices));
    env.insert(env.end(), {
                              {"LD_PRELOAD", GPULIMIT_LIBRARY_PATH},
                              {"GPULIMIT_TENANT", "probe"},
                              {"GPULIMIT_LEDGER_DIR", directory_.path()},
                              {"ASAN_OPTIONS", "verify_asan_link_order=0"},
                          });
    if (gated) env.emplace_back("GPULIMIT_SOCKET", socket_path());
    return env;
  }

  std::unique_ptr<ProbeProcess> start_probe(const Environment& env) {
    return std::make_unique<ProbeProcess>(
        std::vector<std::string>{GATE_PROBE_PATH}, env,
        directory_.path() + "/probe-" + std::to_string(++probes_) + ".err");
  }

  // A probe that has run cuInit (and so attached) with device `device` current.
  std::unique_ptr<ProbeProcess> attached_probe(uint32_t devices = 1, int device = 0) {
    auto probe = start_probe(environment(devices));
    const auto answer = probe->ask("init " + std::to_string(device));
    EXPECT_EQ(answer.value_or("none"), "init 0") << probe->stderr_text();
    return probe;
  }

  std::vector<TracedKernel> traced_kernels(pid_t pid) const { return machine_.traced_kernels(pid); }

  static auto from(pid_t pid, Type type) {
    return [pid, type](const Received& r) { return r.peer == pid && r.type == type; };
  }

  size_t count(pid_t pid, Type type) const {
    const auto all = server_->received();
    return static_cast<size_t>(std::count_if(all.begin(), all.end(), from(pid, type)));
  }

  gpulimit::testing::TemporaryDirectory directory_;
  // The simulator's own memory sizes: the gate's tests allocate nothing.
  SimulatedMachine machine_{MachineShape{1, "", ""}};
  std::unique_ptr<StandInServer> server_;
  int probes_ = 0;
};

uint64_t answer_time(const std::string& answer) {
  return std::stoull(words(answer).back());
}

TEST_F(LaunchGate, LaunchesPassAtOnceWhileTheTenantHoldsTheToken) {
  StandInServer& server = start_server();
  server.grant(0, 1);
  auto probe = attached_probe();
  ASSERT_TRUE(server.wait_for(from(probe->pid(), Type::kHello), kSoon));

  const auto launched = probe->ask("launch kernel 1000000 8");
  ASSERT_TRUE(launched);
  EXPECT_EQ(words(*launched)[1], "0");
  const auto synced = probe->ask("sync");
  ASSERT_TRUE(synced);
  EXPECT_EQ(words(*synced)[1], "0");

  EXPECT_EQ(traced_kernels(probe->pid()).size(), 8u);
  EXPECT_EQ(count(probe->pid(), Type::kWant), 0u) << "a holder never asks for the token";
  const std::vector<Received> hellos = server.received();
  ASSERT_FALSE(hellos.empty());
  EXPECT_EQ(hellos[0].tenant, "probe");
  EXPECT_EQ(hellos[0].claimed_pid, probe->pid());
  EXPECT_EQ(hellos[0].device_count, 1u);
}

// Every hook: a launch waits while another tenant holds the token, says
// Want once, and proceeds right after the grant.
class EveryLaunchPath : public LaunchGate, public testing::WithParamInterface<std::string> {};

TEST_P(EveryLaunchPath, WaitsForTheTokenAndProceedsAfterTheGrant) {
  StandInServer& server = start_server();
  server.grant(0, kOtherTenant);
  auto probe = attached_probe();

  probe->send("launch " + GetParam() + " 1000000 1");
  EXPECT_FALSE(probe->read_line(kBlocked)) << "launched while another tenant held the token";
  const auto want = server.wait_for(from(probe->pid(), Type::kWant), kSoon);
  ASSERT_TRUE(want);
  EXPECT_EQ(want->board_device, 0u);

  const uint64_t granted_at = monotonic_ns();
  server.grant(0, 1);
  const auto launched = probe->read_line(kSoon);
  ASSERT_TRUE(launched) << probe->stderr_text();
  EXPECT_EQ(words(*launched)[1], "0");
  EXPECT_GE(answer_time(*launched), granted_at);
  ASSERT_TRUE(probe->ask("sync"));
  const auto kernels = traced_kernels(probe->pid());
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_GE(kernels[0].start_ns, granted_at);
  EXPECT_EQ(count(probe->pid(), Type::kWant), 1u) << "one Want per wait";
}

INSTANTIATE_TEST_SUITE_P(Hooks, EveryLaunchPath,
                         testing::Values("kernel", "kernel_ptsz", "kernel_ex", "kernel_ex_ptsz",
                                         "cooperative", "cooperative_ptsz", "graph", "graph_ptsz"));

TEST_F(LaunchGate, AcknowledgesARevokeOnlyOnceItsQueuedKernelsHaveFinished) {
  StandInServer& server = start_server();
  server.grant(0, 1);
  auto probe = attached_probe();
  // 200 ms of kernels queued, returned at once.
  ASSERT_TRUE(probe->ask("launch kernel 20000000 10"));

  const uint32_t grant = server.grant_number(0);
  server.revoke(0);
  const auto ack = server.wait_for(from(probe->pid(), Type::kAck), kSoon);
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->board_device, 0u);
  EXPECT_EQ(ack->grant, grant);

  // Revoked: the next launch waits for a new grant.
  probe->send("launch kernel 1000000 1");
  EXPECT_FALSE(probe->read_line(kBlocked)) << "launched while revoked";
  const uint64_t regranted_at = monotonic_ns();
  server.grant(0, 1);
  ASSERT_TRUE(probe->read_line(kSoon));
  ASSERT_TRUE(probe->ask("sync"));

  const auto kernels = traced_kernels(probe->pid());
  ASSERT_EQ(kernels.size(), 11u);
  for (size_t i = 0; i < 10; ++i)
    EXPECT_LE(kernels[i].end_ns, ack->at_ns) << "kernel " << i << " ran past the Ack";
  EXPECT_GE(kernels[10].start_ns, regranted_at) << "a kernel started before the next grant";
  EXPECT_EQ(count(probe->pid(), Type::kAck), 1u);
}

// A context the process creates while it holds the token, and first
// launches into on the fast path (which does not look up the context in a
// process that sees one device): the drain waits for it all the same.
TEST_F(LaunchGate, DrainsAContextFirstLaunchedIntoWhileHoldingTheToken) {
  StandInServer& server = start_server();
  server.grant(0, 1);
  auto probe = attached_probe();
  ASSERT_TRUE(probe->ask("launch kernel 1000000 1"));  // the primary context's first launch
  ASSERT_EQ(probe->ask("context").value_or("none"), "context 0") << probe->stderr_text();
  // 200 ms of kernels queued in the new context, returned at once.
  ASSERT_TRUE(probe->ask("launch kernel 20000000 10"));

  server.revoke(0);
  const auto ack = server.wait_for(from(probe->pid(), Type::kAck), kSoon);
  ASSERT_TRUE(ack);
  ASSERT_TRUE(probe->ask("sync"));

  const auto kernels = traced_kernels(probe->pid());
  ASSERT_EQ(kernels.size(), 11u);
  for (size_t i = 1; i < kernels.size(); ++i)
    EXPECT_LE(kernels[i].end_ns, ack->at_ns) << "kernel " << i << " ran past the Ack";
}

// A launch that passed the gate but is still inside the driver when the
// revoke comes (the simulator holds each launch 200 ms before it queues
// anything): the Ack waits for it to leave the driver and for its kernel.
TEST_F(LaunchGate, AcknowledgesOnlyOnceALaunchInsideTheDriverHasFinished) {
  StandInServer& server = start_server();
  server.grant(0, 1);
  Environment env = environment();
  env.emplace_back("FAKECUDA_LAUNCH_DELAY_NS", "200000000");
  auto probe = start_probe(env);
  ASSERT_EQ(probe->ask("init").value_or(""), "init 0");

  probe->send("launch kernel 1000000 1");
  std::this_thread::sleep_for(50ms);  // past the gate, inside the driver
  const uint32_t grant = server.grant_number(0);
  server.revoke(0);
  const auto ack = server.wait_for(from(probe->pid(), Type::kAck), kSoon);
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->grant, grant);
  const auto launched = probe->read_line(kSoon);
  ASSERT_TRUE(launched);
  ASSERT_TRUE(probe->ask("sync"));
  const auto kernels = traced_kernels(probe->pid());
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_LE(kernels[0].end_ns, ack->at_ns) << "acknowledged with a launch still inside the driver";
}

TEST_F(LaunchGate, NeverBlocksACapturingStream) {
  StandInServer& server = start_server();
  server.grant(0, kOtherTenant);
  auto probe = attached_probe();

  ASSERT_EQ(probe->ask("begin-capture").value_or(""), "capturing 0");
  const auto captured = probe->ask("end-capture 1000000", 5s);
  ASSERT_TRUE(captured) << "a launch into a capture waited for the token";
  EXPECT_EQ(words(*captured)[1], "0");
  EXPECT_EQ(words(*captured)[2], "0") << "the capture was invalidated";
  EXPECT_EQ(count(probe->pid(), Type::kWant), 0u);
}

TEST_F(LaunchGate, DrainsWithoutInvalidatingAGlobalCaptureOfTheProgram) {
  StandInServer& server = start_server();
  server.grant(0, 1);
  auto probe = attached_probe();
  ASSERT_TRUE(probe->ask("launch kernel 20000000 5"));
  ASSERT_EQ(probe->ask("begin-capture").value_or(""), "capturing 0");

  server.revoke(0);
  const auto ack = server.wait_for(from(probe->pid(), Type::kAck), kSoon);
  ASSERT_TRUE(ack);

  const auto captured = probe->ask("end-capture 1000000", 5s);
  ASSERT_TRUE(captured);
  EXPECT_EQ(words(*captured)[1], "0");
  EXPECT_EQ(words(*captured)[2], "0") << "the drain invalidated the program's capture";
  for (const TracedKernel& k : traced_kernels(probe->pid()))
    EXPECT_LE(k.end_ns, ack->at_ns);
}

TEST_F(LaunchGate, ReportsIdleOncePerGrantWhenTheHolderStopsLaunchingWhileOthersWait) {
  StandInServer& server = start_server(1, 4000);  // idle window: 1 ms
  server.grant(0, 1);
  auto probe = attached_probe();
  ASSERT_TRUE(probe->ask("launch kernel 1000000 1"));
  ASSERT_TRUE(probe->ask("sync"));

  // Nobody waits: a holder keeps the token however idle it is.
  std::this_thread::sleep_for(kBlocked);
  EXPECT_EQ(count(probe->pid(), Type::kIdle), 0u);

  server.set_waiting(0, 1);
  const auto idle = server.wait_for(from(probe->pid(), Type::kIdle), kSoon);
  ASSERT_TRUE(idle);
  EXPECT_EQ(idle->board_device, 0u);
  EXPECT_EQ(idle->grant, server.grant_number(0));
  std::this_thread::sleep_for(kBlocked);
  EXPECT_EQ(count(probe->pid(), Type::kIdle), 1u) << "Idle is said once per grant";

  server.grant(0, 1);
  const uint32_t second = server.grant_number(0);
  const auto again = server.wait_for(
      [&](const Received& r) { return from(probe->pid(), Type::kIdle)(r) && r.grant == second; },
      kSoon);
  EXPECT_TRUE(again);
}

// A lost wake: the token went to the probe and back to the other tenant
// while the waiting launch was between its look at the token and its futex
// call, so it sleeps on the value it saw with the wakes already gone, and
// the server no longer counts it as wanting. Its wait is bounded: it looks
// again, sees a later grant and says Want again.
TEST_F(LaunchGate, AWaitingLaunchWantsAgainAfterAGrantWhoseWakeItMissed) {
  StandInServer& server = start_server();
  server.grant(0, kOtherTenant);
  auto probe = attached_probe();
  probe->send("launch kernel 1000000 1");
  ASSERT_TRUE(server.wait_for(from(probe->pid(), Type::kWant), kSoon));
  EXPECT_FALSE(probe->read_line(kBlocked)) << "launched while another tenant held the token";

  server.grant_unwoken(0, 1);
  server.grant_unwoken(0, kOtherTenant);
  EXPECT_TRUE(server.wait_for_count(from(probe->pid(), Type::kWant), 2, kSoon))
      << "the waiting launch slept through the grant for good";

  server.grant(0, 1);
  const auto launched = probe->read_line(kSoon);
  ASSERT_TRUE(launched) << probe->stderr_text();
  EXPECT_EQ(words(*launched)[1], "0");
}

// The same for the drain thread: after its Ack it sleeps on token_revoked;
// the token is granted to the probe again and revoked again, all unwoken.
// The new revoke still gets its Ack, well within the server's ack timeout.
TEST_F(LaunchGate, AcknowledgesARevokeWhoseWakeItMissed) {
  StandInServer& server = start_server();
  server.grant(0, 1);
  auto probe = attached_probe();
  ASSERT_TRUE(probe->ask("launch kernel 1000000 1"));
  server.revoke(0);
  ASSERT_TRUE(server.wait_for(from(probe->pid(), Type::kAck), kSoon));
  std::this_thread::sleep_for(kBlocked);  // the drain thread asleep on token_revoked(1)

  server.grant_unwoken(0, 1);
  const uint32_t again = server.grant_number(0);
  server.revoke_unwoken(0);
  const auto ack = server.wait_for(
      [&](const Received& r) { return from(probe->pid(), Type::kAck)(r) && r.grant == again; },
      kSoon);
  EXPECT_TRUE(ack) << "the drain thread slept through the second revoke";
}

TEST_F(LaunchGate, TurnsUngatedWhenTheServerGoesAndAWaitingLaunchProceeds) {
  StandInServer& server = start_server();
  server.grant(0, kOtherTenant);
  auto probe = attached_probe();
  probe->send("launch kernel 1000000 1");
  EXPECT_FALSE(probe->read_line(kBlocked));

  server.stop();
  const auto launched = probe->read_line(kSoon);
  ASSERT_TRUE(launched) << "a waiting launch stayed blocked after the server went";
  EXPECT_EQ(words(*launched)[1], "0");
  const auto again = probe->ask("launch kernel 1000000 4", 5s);
  ASSERT_TRUE(again);
  EXPECT_EQ(words(*again)[1], "0");
  EXPECT_EQ(probe->stderr_text(), "") << "no compute limit was asked for: nothing to say";
}

TEST_F(LaunchGate, AttachesAgainWhenTheServerIsBack) {
  start_server();
  auto probe = attached_probe();
  server_->stop();
  server_.reset();

  StandInServer& back = start_server();  // a new board
  const auto hello = back.wait_for(from(probe->pid(), Type::kHello), kSoon);
  ASSERT_TRUE(hello) << "no new Hello after the server came back";
  // An Ack tells that the process is gated again; then it waits for a grant.
  back.grant(0, 1);
  back.revoke(0);
  ASSERT_TRUE(back.wait_for(from(probe->pid(), Type::kAck), kSoon));
  probe->send("launch kernel 1000000 1");
  EXPECT_FALSE(probe->read_line(kBlocked)) << "ungated after attaching again";
  ASSERT_TRUE(back.wait_for(from(probe->pid(), Type::kWant), kSoon));
  back.grant(0, 1);
  ASSERT_TRUE(probe->read_line(kSoon));
}

TEST_F(LaunchGate, TriesAgainAServerThatHungUpWithoutAnswering) {
  StandInServer& server = start_server();
  server.hang_up_on_hello(true);
  auto probe = attached_probe();
  ASSERT_TRUE(server.wait_for(from(probe->pid(), Type::kHello), kSoon));
  ASSERT_TRUE(probe->ask("launch kernel 1000000 1", 5s)) << "ungated meanwhile";

  server.hang_up_on_hello(false);
  ASSERT_TRUE(server.wait_for_count(from(probe->pid(), Type::kHello), 2, kSoon))
      << "no second Hello";
  server.grant(0, 1);
  server.revoke(0);
  EXPECT_TRUE(server.wait_for(from(probe->pid(), Type::kAck), kSoon)) << "not attached";
}

TEST_F(LaunchGate, AForkedChildAttachesAsAProcessOfItsOwn) {
  StandInServer& server = start_server();
  server.grant(0, 1);
  auto probe = attached_probe();
  ASSERT_TRUE(server.wait_for(from(probe->pid(), Type::kHello), kSoon));

  const auto child = probe->ask("fork 1000000");
  ASSERT_TRUE(child);
  const pid_t child_pid = std::stoi(words(*child)[1]);
  // The simulator, like the driver, refuses CUDA in a child of an
  // initialised process: the launch reached it, ungated by nothing.
  EXPECT_EQ(words(*child)[2], "3");  // CUDA_ERROR_NOT_INITIALIZED
  const auto hello = server.wait_for(from(child_pid, Type::kHello), kSoon);
  ASSERT_TRUE(hello) << "the child did not attach on its own connection";
  EXPECT_EQ(hello->claimed_pid, child_pid);
  EXPECT_EQ(hello->tenant, "probe");
  EXPECT_EQ(count(probe->pid(), Type::kHello), 1u) << "the child used the parent's connection";

  // The parent's connection and drain thread still serve the parent.
  server.revoke(0);
  ASSERT_TRUE(server.wait_for(from(probe->pid(), Type::kAck), kSoon));
}

TEST_F(LaunchGate, WithoutASocketTheHooksPassThrough) {
  auto plain = start_probe({{"FAKECUDA_STATE", directory_.path() + "/plain.state"}});
  ASSERT_EQ(plain->ask("init").value_or(""), "init 0");
  const auto plain_threads = plain->ask("threads");

  auto probe = start_probe(environment(1, false));
  ASSERT_EQ(probe->ask("init").value_or(""), "init 0");
  EXPECT_EQ(probe->ask("threads"), plain_threads) << "the library started threads of its own";
  const auto launched = probe->ask("launch kernel 1000000 4", 5s);
  ASSERT_TRUE(launched);
  EXPECT_EQ(words(*launched)[1], "0");
  EXPECT_EQ(probe->stderr_text(), "");
}

TEST_F(LaunchGate, AttachedProcessesRunAWatcherAndADrainThreadPerDevice) {
  start_server(2);
  auto probe = attached_probe(2);
  auto plain = start_probe(environment(2, false));
  ASSERT_EQ(plain->ask("init").value_or(""), "init 0");
  const int gated = std::stoi(words(probe->ask("threads").value_or("threads 0"))[1]);
  const int ungated = std::stoi(words(plain->ask("threads").value_or("threads 0"))[1]);
  EXPECT_EQ(gated, ungated + 3 + kSanitizerThreads);
}

TEST_F(LaunchGate, ARefusalIsOneLineAndLaunchesRunUngated) {
  StandInServer& server = start_server();
  server.refuse_with("tenant probe may not use this GPU");
  Environment env = environment();
  env.emplace_back("GPULIMIT_SM", "30");
  auto probe = start_probe(env);
  ASSERT_EQ(probe->ask("init").value_or(""), "init 0");
  const auto launched = probe->ask("launch kernel 1000000 1", 5s);
  ASSERT_TRUE(launched) << "a refused process waited for a token";
  EXPECT_EQ(words(*launched)[1], "0");
  EXPECT_EQ(probe->stderr_text(),
            "gpulimit: tenant probe may not use this GPU; --sm 30 is not enforced\n");
}

TEST_F(LaunchGate, SaysOnceThatAnUnreachableServerLeavesAskedLimitsUnenforced) {
  Environment env = environment();
  env.emplace_back("GPULIMIT_SM", "30");
  auto probe = start_probe(env);
  ASSERT_EQ(probe->ask("init").value_or(""), "init 0");
  const auto launched = probe->ask("launch kernel 1000000 2", 5s);
  ASSERT_TRUE(launched);
  EXPECT_EQ(words(*launched)[1], "0");
  const std::string text = probe->stderr_text();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_EQ(text.rfind("gpulimit: cannot connect to " + socket_path(), 0), 0u) << text;
  EXPECT_NE(text.find("--sm 30 is not enforced"), std::string::npos) << text;

  auto quiet = start_probe(environment());
  ASSERT_EQ(quiet->ask("init").value_or(""), "init 0");
  ASSERT_TRUE(quiet->ask("launch kernel 1000000 1", 5s));
  EXPECT_EQ(quiet->stderr_text(), "") << "nothing asked, nothing to say";
}

TEST_F(LaunchGate, EachDeviceHasItsOwnToken) {
  StandInServer& server = start_server(2);
  server.grant(0, 1);
  server.grant(1, kOtherTenant);
  auto probe = attached_probe(2, 0);
  const auto first = probe->ask("launch kernel 1000000 1", 5s);
  ASSERT_TRUE(first);

  ASSERT_EQ(probe->ask("device 1").value_or(""), "device 0");
  probe->send("launch kernel 1000000 1");
  EXPECT_FALSE(probe->read_line(kBlocked)) << "launched on device 1 on device 0's token";
  const auto want = server.wait_for(from(probe->pid(), Type::kWant), kSoon);
  ASSERT_TRUE(want);
  EXPECT_EQ(want->board_device, 1u);
  server.grant(1, 1);
  ASSERT_TRUE(probe->read_line(kSoon));

  // Back on device 0 (the thread's cached device changes with the context).
  ASSERT_EQ(probe->ask("device 0").value_or(""), "device 0");
  server.revoke(1);
  ASSERT_TRUE(probe->ask("launch kernel 1000000 1", 5s)) << "device 0's token is still held";
  const auto ack = server.wait_for(from(probe->pid(), Type::kAck), kSoon);
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->board_device, 1u);
}

// Revokes and grants the token of device 0 to `tenant` every 40 ms, `rounds`
// times; returns the intervals from each Ack of `pid` to the next grant.
struct Gap {
  uint64_t acked_ns, granted_ns;
};
std::vector<Gap> revoke_and_grant(StandInServer& server, pid_t pid, uint32_t tenant, int rounds) {
  std::vector<Gap> gaps;
  for (int round = 0; round < rounds; ++round) {
    std::this_thread::sleep_for(40ms);
    const uint32_t grant = server.grant_number(0);
    server.revoke(0);
    const auto ack = server.wait_for(
        [&](const Received& r) {
          return r.peer == pid && r.type == Type::kAck && r.grant == grant;
        },
        kSoon);
    EXPECT_TRUE(ack) << "round " << round;
    if (!ack) break;
    std::this_thread::sleep_for(20ms);
    gaps.push_back({ack->at_ns, monotonic_ns()});
    server.grant(0, tenant);
  }
  return gaps;
}

void expect_nothing_ran_in(const std::vector<TracedKernel>& kernels, const std::vector<Gap>& gaps) {
  for (const TracedKernel& k : kernels)
    for (const Gap& gap : gaps)
      EXPECT_FALSE(k.start_ns < gap.granted_ns && k.end_ns > gap.acked_ns)
          << "a kernel ran from " << k.start_ns << " to " << k.end_ns << " in the gap "
          << gap.acked_ns << " to " << gap.granted_ns;
}

// Four threads launching at once while the token goes and comes back: the
// drain waits for launches that passed the gate just before the revoke.
TEST_F(LaunchGate, ConcurrentLaunchersNeverRunBetweenAnAckAndTheNextGrant) {
  StandInServer& server = start_server();
  server.grant(0, 1);
  auto probe = attached_probe();
  probe->send("storm 4 1500 200000");
  const std::vector<Gap> gaps = revoke_and_grant(server, probe->pid(), 1, 10);
  const auto stormed = probe->read_line(kSoon);
  ASSERT_TRUE(stormed);
  EXPECT_EQ(words(*stormed)[2], "0");
  const auto kernels = traced_kernels(probe->pid());
  EXPECT_GT(kernels.size(), 100u);
  expect_nothing_ran_in(kernels, gaps);
}

// The spinner workload (2 streams, 1 ms kernels) while the test revokes and
// grants the token every 40 ms: no kernel of it runs between an Ack and the
// next grant.
TEST_F(LaunchGate, ASpinnerNeverRunsBetweenItsAckAndTheNextGrant) {
  StandInServer& server = start_server();
  ASSERT_EQ(server.tenant_number("spinner"), 2u);
  server.grant(0, 2);
  Environment env = environment();
  for (auto& [name, value] : env)
    if (name == "GPULIMIT_TENANT") value = "spinner";
  ProbeProcess spinner({WORKLOAD_SPINNER_PATH, "--seconds", "3", "--kernel-ns", "1000000",
                        "--streams", "2", "--batch", "2"},
                       env, directory_.path() + "/spinner.err");
  ASSERT_TRUE(server.wait_for(from(spinner.pid(), Type::kHello), kSoon));

  const std::vector<Gap> gaps = revoke_and_grant(server, spinner.pid(), 2, 10);
  ASSERT_EQ(spinner.wait(60s), 0) << spinner.stderr_text();
  const auto kernels = traced_kernels(spinner.pid());
  EXPECT_GT(kernels.size(), 100u);
  expect_nothing_ran_in(kernels, gaps);
}

}  // namespace
}  // namespace gate_test
