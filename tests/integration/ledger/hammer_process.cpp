#include "hammer_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <thread>

namespace ledger_test {
namespace {

using Clock = std::chrono::steady_clock;

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    text.remove_prefix(static_cast<size_t>(written));
  }
}

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

bool HammerProcess::read_more(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return false;
  pollfd ready{from_child_, POLLIN, 0};
  const int polled = poll(&ready, 1, static_cast<int>(left));
  if (polled < 0 && errno == EINTR) return true;
  if (polled <= 0) return false;
  char chunk[4096];
  const ssize_t got = read(from_child_, chunk, sizeof chunk);
  if (got < 0 && errno == EINTR) return true;
  if (got <= 0) return false;  // the process closed its output: it ended
  buffered_.append(chunk, static_cast<size_t>(got));
  return true;
}

std::string HammerProcess::expect(std::string_view prefix, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    size_t newline;
    while ((newline = buffered_.find('\n')) != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      if (line.starts_with(prefix)) return line;
    }
    if (!read_more(deadline)) return {};
  }
}

std::string HammerProcess::ask(std::string_view command, std::string_view answer_prefix) {
  send(command);
  return expect(answer_prefix);
}

void HammerProcess::kill_now() {
  if (pid_ <= 0 || reaped_) return;
  kill(pid_, SIGKILL);
  int status;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
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
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int status;
    const pid_t changed = waitpid(pid_, &status, WNOHANG);
    if (changed == pid_) {
      reaped_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
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
