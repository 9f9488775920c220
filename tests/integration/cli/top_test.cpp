// gpulimit top end to end: a real gpulimitd with two capped tenants on the
// simulated GPU, read by `gpulimit top --batch`; and the terminal view, run
// in a pseudo-terminal of 80 x 24 as over ssh, quitting with q, interrupted,
// resized, and outliving its server.
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/testing/server_listening.h"
#include "job_under_server.h"
#include "simulated_machine.h"
#include "top_terminal_process.h"
#include "workload_process.h"

namespace integration {
namespace {

using namespace std::chrono_literals;

const std::string kServer = GPULIMITD_PATH;
const std::string kCli = GPULIMIT_CLI_PATH;

// What the view writes on entering and on leaving (top_screen.h).
constexpr std::string_view kEnterScreen = "\x1b[?1049h";
constexpr std::string_view kLeaveScreen = "\x1b[?25h\x1b[?1049l";

std::string user_name() {
  const passwd* entry = getpwuid(geteuid());
  return entry ? entry->pw_name : std::to_string(geteuid());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// The lines of `text` that contain `word`.
std::vector<std::string> lines_with(const std::string& text, const std::string& word) {
  std::vector<std::string> found;
  for (const std::string& line : lines_of(text))
    if (line.find(word) != std::string::npos) found.push_back(line);
  return found;
}

bool settings_restored(const termios& now, const termios& before) {
  return now.c_lflag == before.c_lflag && now.c_iflag == before.c_iflag &&
         now.c_oflag == before.c_oflag && now.c_cc[VMIN] == before.c_cc[VMIN] &&
         now.c_cc[VTIME] == before.c_cc[VTIME];
}

class Top : public testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start_server()); }

  // gpulimitd on this test's socket, in the foreground so that the test
  // owns the process.
  void start_server() {
    server_ = std::make_unique<WorkloadProcess>(
        kServer,
        std::vector<std::string>{"--foreground", "--socket", socket_path(), "--idle-exit-s", "600"},
        machine_.environment());
    ASSERT_TRUE(server_->started());
    std::string error;
    ASSERT_TRUE(gpulimit::testing::wait_until_listening(socket_path(), 20s, error))
        << "gpulimitd never listened: " << error;
  }

  std::string socket_path() const { return sockets_.path() + "/gpulimitd.sock"; }

  // A tenant `id` capped at `mem` that holds `hold` of it until killed.
  void start_tenant(const std::string& id, const std::string& mem, const std::string& hold) {
    const Environment env = job_under_server(machine_, socket_path(), ledgers_.path(), id);
    tenants_.push_back(std::make_unique<WorkloadProcess>(
        kCli,
        std::vector<std::string>{"--mem", mem, "--", kAllocator, "--target", hold, "--chunk", "16M",
                                 "--hold", "600"},
        env));
    ASSERT_TRUE(tenants_.back()->wait_for_output("event=holding", 60s))
        << id << " never held its memory";
  }

  // gpulimit top's environment: this test's server, and nothing of the
  // caller's that could point elsewhere.
  Environment top_environment() const {
    return {{"GPULIMIT_SOCKET", socket_path()},
            {"XDG_RUNTIME_DIR", sockets_.path()},
            {"COLUMNS", ""},
            {"ASAN_OPTIONS", "verify_asan_link_order=0"}};
  }

  // The same, whole, for a program started in a terminal.
  std::vector<std::string> terminal_environment() const {
    const char* path = std::getenv("PATH");
    return {"GPULIMIT_SOCKET=" + socket_path(), "XDG_RUNTIME_DIR=" + sockets_.path(), "TERM=xterm",
            std::string("PATH=") + (path ? path : "/usr/bin:/bin"),
            "ASAN_OPTIONS=verify_asan_link_order=0"};
  }

  SimulatedMachine machine_{"4G"};
  TemporaryDirectory sockets_;
  TemporaryDirectory ledgers_;
  std::unique_ptr<WorkloadProcess> server_;
  std::vector<std::unique_ptr<WorkloadProcess>> tenants_;
};

TEST_F(Top, BatchFramesShowBothTenantsTheirUsersAndCaps) {
  ASSERT_NO_FATAL_FAILURE(start_tenant("top-alpha", "1G", "256M"));
  ASSERT_NO_FATAL_FAILURE(start_tenant("top-beta", "512M", "128M"));

  const WorkloadRun run = run_workload(
      kCli, {"top", "--batch", "--iterations", "2", "--interval", "0.2"}, top_environment());

  ASSERT_EQ(run.exit_status, 0) << run.describe();
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(run.out.find('\x1b'), std::string::npos) << "escape sequences in batch output";
  EXPECT_EQ(lines_with(run.out, "top ").size(), 2u) << run.out;
  const std::vector<std::string> alpha = lines_with(run.out, "top-alpha");
  const std::vector<std::string> beta = lines_with(run.out, "top-beta");
  ASSERT_EQ(alpha.size(), 2u) << run.out;  // one row a frame
  ASSERT_EQ(beta.size(), 2u) << run.out;
  for (const std::string& row : alpha) {
    EXPECT_TRUE(row.starts_with(user_name() + " ")) << row;
    EXPECT_NE(row.find("256M/1G"), std::string::npos) << row;
  }
  for (const std::string& row : beta) {
    EXPECT_TRUE(row.starts_with(user_name() + " ")) << row;
    EXPECT_NE(row.find("128M/512M"), std::string::npos) << row;
  }
}

TEST_F(Top, BatchLinesAreCutToColumns) {
  ASSERT_NO_FATAL_FAILURE(start_tenant("top-alpha", "1G", "256M"));

  const WorkloadRun run = run_workload(kCli, {"top", "--batch", "--iterations", "1"},
                                       with(top_environment(), "COLUMNS", "40"));

  ASSERT_EQ(run.exit_status, 0) << run.describe();
  for (const std::string& line : lines_of(run.out))
    EXPECT_LE(line.size(), 40u) << line;
  EXPECT_EQ(lines_with(run.out, "256M/1G").size(), 1u) << run.out;
}

TEST_F(Top, AServerThatGoesAwayIsShownAsNoServerUntilOneIsBack) {
  WorkloadProcess top(kCli, {"top", "--batch", "--iterations", "1000", "--interval", "0.2"},
                      top_environment());
  ASSERT_TRUE(top.wait_for_output("gpulimitd " + std::to_string(server_->pid()) + " ", 30s));

  server_->kill_now();
  ASSERT_TRUE(top.wait_for_output("no server", 30s)) << "top ended or never said so";
  server_.reset();
  ASSERT_NO_FATAL_FAILURE(start_server());

  EXPECT_TRUE(top.wait_for_output("gpulimitd " + std::to_string(server_->pid()) + " ", 30s))
      << "top ended or never found the new server";
}

TEST_F(Top, TheViewQuitsOnQAndPutsTheTerminalBack) {
  ASSERT_NO_FATAL_FAILURE(start_tenant("top-alpha", "1G", "256M"));
  TerminalProcess view(kCli, {"top"}, terminal_environment(), 80, 24);
  ASSERT_TRUE(view.started());
  ASSERT_TRUE(view.wait_for_output("256M/1G", 30s)) << view.output();

  ASSERT_TRUE(view.type("q"));
  const int status = view.wait(30s);

  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status;
  EXPECT_TRUE(view.output().starts_with(kEnterScreen)) << view.output();
  EXPECT_TRUE(view.output().ends_with(kLeaveScreen)) << view.output();
  EXPECT_TRUE(settings_restored(view.settings(), view.initial_settings()));
  for (const std::string& piece : written_pieces(view.output()))
    EXPECT_LE(piece.size(), 80u) << piece;
}

TEST_F(Top, CtrlCAndSigtermPutTheTerminalBackAndEndByTheSignal) {
  for (const bool by_key : {true, false}) {
    TerminalProcess view(kCli, {"top"}, terminal_environment(), 80, 24);
    ASSERT_TRUE(view.wait_for_output("sort:", 30s)) << view.output();

    ASSERT_TRUE(by_key ? view.type("\x03") : kill(view.pid(), SIGTERM) == 0);
    const int status = view.wait(30s);

    const int expected = by_key ? SIGINT : SIGTERM;
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == expected) << "wait status " << status;
    EXPECT_TRUE(view.output().ends_with(kLeaveScreen)) << view.output();
    EXPECT_TRUE(settings_restored(view.settings(), view.initial_settings()));
  }
}

TEST_F(Top, TheViewRedrawsAtTheNewSizeWhenTheTerminalIsResized) {
  ASSERT_NO_FATAL_FAILURE(start_tenant("top-alpha", "1G", "256M"));
  // No refresh comes due during the test: only the resize redraws.
  TerminalProcess view(kCli, {"top", "--interval", "3600"}, terminal_environment(), 100, 24);
  ASSERT_TRUE(view.wait_for_output("\x1b[J", 30s)) << view.output();
  const std::size_t before = view.output().size();

  ASSERT_TRUE(view.resize(50, 10));
  ASSERT_TRUE(view.wait_for_output("\x1b[J", 30s, before)) << "no redraw after the resize";
  ASSERT_TRUE(view.type("q"));
  ASSERT_EQ(view.wait(30s), 0);

  const std::string redrawn = view.output().substr(before);
  EXPECT_NE(redrawn.find("256M/1G"), std::string::npos) << redrawn;
  for (const std::string& piece : written_pieces(redrawn))
    EXPECT_LE(piece.size(), 50u) << piece;
  // Row 10 is the last one written: nothing past the terminal's height.
  EXPECT_EQ(redrawn.find("\x1b[11;1H"), std::string::npos) << redrawn;
}

TEST_F(Top, TheViewNeedsATerminal) {
  const WorkloadRun run = run_workload(kCli, {"top", "--iterations", "1"}, top_environment());

  EXPECT_EQ(run.exit_status, 2) << run.describe();
  EXPECT_EQ(run.out, "");
  EXPECT_NE(run.err.find("--batch"), std::string::npos) << run.err;
}

TEST_F(Top, MalformedArgumentsAreOneLineAndExitTwo) {
  const WorkloadRun run = run_workload(kCli, {"top", "--interval", "0"}, top_environment());

  EXPECT_EQ(run.exit_status, 2) << run.describe();
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(lines_of(run.err).size(), 1u) << run.err;
}

}  // namespace
}  // namespace integration
