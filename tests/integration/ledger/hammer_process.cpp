#include "hammer_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <thread>

#include "gpulimit/testing/child_process.h"
#include "gpulimit/testing/pipe_io.h"

namespace ledger_test {
namespace {

using Clock = std::chrono::steady_clock;

using gpulimit::testing::write_all;

// Where the value of `key=` starts in `line`, for a key at a word's start.
const char* value_of(std::string_view line, std::string_view key) {
  const std::string needle = std::string(key) + "=";
  for (size_t at = line.find(needle); at != std::string_view::npos; at = line.find(needle, at + 1))
    if (at == 0 || line[at - 1] == ' ') return line.data() + at + needle.size();
  return nullptr;
}

}  // namespace

HammerProcess::HammerProcess(const std::string& dir, const std::string& tenant,
                             const std::vector<std::string>& options) {
  std::vector<std::string> args = {LEDGER_HAMMER_PATH, dir, tenant};
  args.insert(args.end(), options.begin(), options.end());
  std::vector<char*> argv;
  for (auto& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);

  int input[2];
  int output[2];
  if (pipe2(input, O_CLOEXEC) < 0 || pipe2(output, O_CLOEXEC) < 0) return;
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Only async-signal-safe calls between fork and exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // no helper outlives a crashed test
    if (getppid() != parent) _exit(127);
    dup2(input[0], STDIN_FILENO);
    dup2(output[1], STDOUT_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(input[0]);
  close(output[1]);
  to_child_ = input[1];
  from_child_ = output[0];
  // A write to a helper that died must fail, not kill the test.
  signal(SIGPIPE, SIG_IGN);
}

HammerProcess::~HammerProcess() {
  if (pid_ > 0 && !reaped_) kill_now();
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
}

void HammerProcess::send(std::string_view command) {
  write_all(to_child_, std::string(command) + "\n");
}

std::string HammerProcess::expect(std::string_view prefix, std::chrono::milliseconds timeout) {
  return gpulimit::testing::next_line(from_child_, buffered_, prefix, timeout);
}

std::string HammerProcess::ask(std::string_view command, std::string_view answer_prefix) {
  send(command);
  return expect(answer_prefix);
}

void HammerProcess::kill_now() {
  if (pid_ <= 0 || reaped_) return;
  gpulimit::testing::kill_and_reap(pid_);
  reaped_ = true;
}

bool HammerProcess::wait_until_stopped(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int status;
    const pid_t changed = waitpid(pid_, &status, WUNTRACED | WNOHANG);
    if (changed == pid_ && WIFSTOPPED(status)) return true;
    if (changed == pid_) {
      reaped_ = true;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

void HammerProcess::resume() {
  kill(pid_, SIGCONT);
}

int HammerProcess::exit_now(std::chrono::milliseconds timeout) {
  send("exit");
  const int status = gpulimit::testing::reap_by(pid_, Clock::now() + timeout);
  if (status >= 0) {
    reaped_ = true;
    return status;
  }
  kill_now();
  return -1;
}

uint64_t number_in(std::string_view line, std::string_view key, uint64_t fallback) {
  const char* begin = value_of(line, key);
  uint64_t value = fallback;
  if (begin) std::from_chars(begin, line.data() + line.size(), value);
  return value;
}

std::vector<uint64_t> numbers_in(std::string_view line, std::string_view key) {
  std::vector<uint64_t> values;
  const char* end = line.data() + line.size();
  for (const char* cursor = value_of(line, key); cursor;) {
    uint64_t value = 0;
    const auto [next, error] = std::from_chars(cursor, end, value);
    if (error != std::errc()) break;
    values.push_back(value);
    cursor = next != end && *next == ',' ? next + 1 : nullptr;
  }
  return values;
}

}  // namespace ledger_test
