// gpulimitd's costs: how long the scheduler takes to decide a handoff among
// many tenants, and how long a process takes to attach (connect, Hello,
// Welcome with the board), alone and 300 at once, to a server running in
// this process's second thread.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/protocol/messages.h"
#include "gpulimit/server/loop/server.h"
#include "gpulimit/server/scheduling/token_scheduler.h"

namespace {

namespace protocol = gpulimit::protocol;
namespace server = gpulimit::server;
using server::TimeNs;

// ---------------------------------------------------------------------------
// Scheduler decisions

// N tenants of mixed weights all want device 0; each iteration is one
// handoff: the quantum ends (revoke), the holder drains (release, pick the
// next of N, grant), and the old holder wants again.
void BM_SchedulerHandoff(benchmark::State& state) {
  const auto tenants = static_cast<server::TenantNumber>(state.range(0));
  server::SchedulerSettings settings;
  server::TokenScheduler sut(settings);
  TimeNs now = 0;
  for (server::TenantNumber t = 1; t <= tenants; ++t) {
    sut.add_tenant(t, server::ComputeShare{0, 1 + t % 8, protocol::Priority::kNormal});
    sut.set_wanting(t, 0, true, now);
  }
  sut.take_changes();
  for (auto _ : state) {
    now += settings.quantum_ns;
    sut.advance(now);  // revokes the holder
    const server::TenantNumber holder = sut.holder(0);
    now += 50'000;
    sut.holder_drained(holder, 0, now);  // picks the next
    sut.set_wanting(holder, 0, true, now);
    benchmark::DoNotOptimize(sut.take_changes());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("handoffs");
}
BENCHMARK(BM_SchedulerHandoff)->Arg(2)->Arg(64)->Arg(300);

// A Want of one more tenant while N others wait: the event every blocked
// launch sends.
void BM_SchedulerWant(benchmark::State& state) {
  const auto tenants = static_cast<server::TenantNumber>(state.range(0));
  server::TokenScheduler sut(server::SchedulerSettings{});
  for (server::TenantNumber t = 1; t <= tenants + 1; ++t)
    sut.add_tenant(t, server::ComputeShare{t % 3 == 0 ? 30u : 0u, 1, protocol::Priority::kNormal});
  for (server::TenantNumber t = 1; t <= tenants; ++t)
    sut.set_wanting(t, 0, true, 0);
  TimeNs now = 1;
  for (auto _ : state) {
    sut.set_wanting(tenants + 1, 0, true, ++now);
    sut.set_wanting(tenants + 1, 0, false, ++now);
    benchmark::DoNotOptimize(sut.next_deadline(now));
  }
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_SchedulerWant)->Arg(64);

// ---------------------------------------------------------------------------
// Attach

class RunningServer {
 public:
  RunningServer() {
    char pattern[] = "/tmp/gpulimit-bench-XXXXXX";
    dir_ = mkdtemp(pattern);
    server::ServerConfig config;
    config.socket_path = dir_ + "/gpulimitd.sock";
    config.own_socket_directory = false;
    config.idle_exit_ns = 0;
    config.handle_signals = false;
    auto started = server::Server::start(config);
    if (!started) {
      error_ = started.error();
      return;
    }
    server_ = std::move(*started);
    thread_ = std::thread([this] { (void)server_->run(); });
  }
  ~RunningServer() {
    if (server_) {
      server_->stop();
      thread_.join();
      server_.reset();
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  const std::string& error() const { return error_; }
  std::string socket() const { return dir_ + "/gpulimitd.sock"; }

 private:
  std::string dir_;
  std::string error_;
  std::unique_ptr<server::Server> server_;
  std::thread thread_;
};

// Connect, Hello, Welcome (with the board's descriptor): true when welcomed.
// Leaves the connection open in `*fd`.
bool attach(const std::string& socket, int* fd) {
  std::string error;
  *fd = protocol::connect_to(socket, error);
  if (*fd < 0) return false;
  auto hello = protocol::make<protocol::Hello>();
  std::strcpy(hello.tenant, "bench");
  hello.claimed_pid = getpid();
  hello.weight = 1;
  std::strcpy(hello.ledger_dir, "/dev/shm");
  hello.device_count = 1;
  hello.uuids[0][0] = 0x42;
  if (!protocol::send_message(*fd, &hello, sizeof hello)) return false;
  protocol::Welcome welcome;
  int board = -1;
  const ssize_t got = protocol::receive_message(*fd, &welcome, sizeof welcome, &board);
  if (board >= 0) close(board);
  return got == static_cast<ssize_t>(sizeof welcome) &&
         welcome.header.type == protocol::Type::kWelcome;
}

void BM_AttachOneProcess(benchmark::State& state) {
  RunningServer running;
  if (!running.error().empty()) {
    state.SkipWithError(running.error().c_str());
    return;
  }
  for (auto _ : state) {
    int fd = -1;
    if (!attach(running.socket(), &fd)) state.SkipWithError("not welcomed");
    state.PauseTiming();
    close(fd);
    state.ResumeTiming();
  }
}
BENCHMARK(BM_AttachOneProcess)->Unit(benchmark::kMicrosecond);

// N processes, started and waiting beforehand, attach at once; the time is
// from their release to the last Welcome.
void BM_AttachAtOnce(benchmark::State& state) {
  const int processes = static_cast<int>(state.range(0));
  RunningServer running;
  if (!running.error().empty()) {
    state.SkipWithError(running.error().c_str());
    return;
  }
  for (auto _ : state) {
    int go[2];
    int done[2];
    if (pipe2(go, O_CLOEXEC) != 0 || pipe2(done, O_CLOEXEC) != 0) {
      state.SkipWithError("pipe");
      return;
    }
    std::vector<pid_t> children;
    for (int i = 0; i < processes; ++i) {
      const pid_t child = fork();
      if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(go[1]);
        char byte;
        while (read(go[0], &byte, 1) < 0 && errno == EINTR) {
        }
        int fd = -1;
        const char answer = attach(running.socket(), &fd) ? 'w' : 'r';
        [[maybe_unused]] const ssize_t written = write(done[1], &answer, 1);
        pause();
        _exit(0);
      }
      children.push_back(child);
    }
    close(done[1]);
    const auto start = std::chrono::steady_clock::now();
    close(go[1]);
    int answered = 0;
    int welcomed = 0;
    while (answered < processes) {
      pollfd ready{done[0], POLLIN, 0};
      if (poll(&ready, 1, 30'000) <= 0) break;
      char answers[512];
      const ssize_t got = read(done[0], answers, sizeof answers);
      if (got <= 0) break;
      for (ssize_t i = 0; i < got; ++i, ++answered)
        welcomed += answers[i] == 'w';
    }
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    for (const pid_t child : children)
      kill(child, SIGKILL);
    for (const pid_t child : children)
      waitpid(child, nullptr, 0);
    close(go[0]);
    close(done[0]);
    if (welcomed != processes) state.SkipWithError("not every process was welcomed");
    // Let the server see every exit before the next round.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  state.counters["processes"] = processes;
}
BENCHMARK(BM_AttachAtOnce)->Arg(300)->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  // The server's info lines (a tenant joined, left) would be measured too.
  spdlog::set_level(spdlog::level::warn);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
