#include "workload_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

extern char** environ;

namespace integration {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(10);

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The last non-empty line of `text`, without its newline.
std::string_view last_line(std::string_view text) {
  while (!text.empty() && text.back() == '\n')
    text.remove_suffix(1);
  const size_t newline = text.rfind('\n');
  return newline == std::string_view::npos ? text : text.substr(newline + 1);
}

std::optional<uint64_t> to_number(std::string_view text) {
  uint64_t number = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return number;
}

// This process's environment with `overrides` replacing or adding variables.
std::vector<std::string> child_environment(const Environment& overrides) {
  std::vector<std::string> result;
  for (char** entry = environ; *entry; ++entry) {
    std::string_view variable(*entry);
    const std::string_view name = variable.substr(0, variable.find('='));
    bool overridden = false;
    for (const auto& [key, value] : overrides)
      overridden = overridden || key == name;
    if (!overridden) result.emplace_back(variable);
  }
  for (const auto& [key, value] : overrides)
    result.push_back(key + "=" + value);
  return result;
}

int status_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

}  // namespace

Report Report::parse(std::string_view line) {
  Report report;
  while (!line.empty()) {
    const size_t space = line.find(' ');
    const std::string_view pair = line.substr(0, space);
    const size_t equals = pair.find('=');
    if (equals != std::string_view::npos)
      report.values_[std::string(pair.substr(0, equals))] = std::string(pair.substr(equals + 1));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  return report;
}

bool Report::has(std::string_view key) const {
  return values_.find(key) != values_.end();
}

std::string Report::text(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) {
    ADD_FAILURE() << "report has no key " << key;
    return "";
  }
  return it->second;
}

uint64_t Report::number(std::string_view key) const {
  const std::string value = text(key);
  const std::optional<uint64_t> number = to_number(value);
  if (!number) ADD_FAILURE() << key << "=" << value << " is not a number";
  return number.value_or(0);
}

std::vector<uint64_t> Report::numbers(std::string_view key) const {
  const std::string list = text(key);
  std::vector<uint64_t> result;
  std::string_view rest = list;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::optional<uint64_t> number = to_number(rest.substr(0, comma));
    if (!number) ADD_FAILURE() << key << "=" << list << " is not a list of numbers";
    result.push_back(number.value_or(0));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return result;
}

std::string WorkloadRun::describe() const {
  std::ostringstream text;
  text << "exit status " << exit_status << (timed_out ? " (timed out)" : "") << "\nstdout:\n"
       << out << "stderr:\n"
       << err;
  return text.str();
}

TemporaryDirectory::TemporaryDirectory() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/gpulimit-test-XXXXXX";
  if (mkdtemp(pattern.data()))
    path_ = pattern;
  else
    ADD_FAILURE() << "mkdtemp(" << pattern << "): " << std::strerror(errno);
}

TemporaryDirectory::~TemporaryDirectory() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

WorkloadProcess::WorkloadProcess(const std::string& program, const std::vector<std::string>& args,
                                 const Environment& environment) {
  if (output_.path().empty()) return;
  out_path_ = output_.path() + "/stdout";
  err_path_ = output_.path() + "/stderr";

  std::vector<std::string> argv_text = {program};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_text)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> envp_text = child_environment(environment);
  std::vector<char*> envp;
  for (std::string& variable : envp_text)
    envp.push_back(variable.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int error =
      posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    pid_ = -1;
    ADD_FAILURE() << "cannot start " << program << ": " << std::strerror(error);
  }
}

WorkloadProcess::~WorkloadProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string WorkloadProcess::read_stdout() const {
  return read_file(out_path_);
}

bool WorkloadProcess::wait_for_output(std::string_view text, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pid_ > 0) {
    if (read_stdout().find(text) != std::string::npos) return true;
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
  return read_stdout().find(text) != std::string::npos;
}

void WorkloadProcess::kill_now() {
  if (pid_ > 0) kill(pid_, SIGKILL);
}

WorkloadRun WorkloadProcess::wait(std::chrono::milliseconds timeout) {
  WorkloadRun run;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pid_ > 0) {
    int wait_status = 0;
    const pid_t waited = waitpid(pid_, &wait_status, WNOHANG);
    if (waited == pid_) {
      run.exit_status = status_of(wait_status);
      pid_ = -1;
      break;
    }
    if (waited < 0 && errno != EINTR) {
      pid_ = -1;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      run.timed_out = true;
      kill(pid_, SIGKILL);
      waitpid(pid_, &wait_status, 0);
      run.exit_status = status_of(wait_status);
      pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  run.out = read_stdout();
  run.err = read_file(err_path_);
  run.report = Report::parse(last_line(run.out));
  return run;
}

WorkloadRun run_workload(const std::string& program, const std::vector<std::string>& args,
                         const Environment& environment, std::chrono::milliseconds timeout) {
  WorkloadProcess process(program, args, environment);
  return process.wait(timeout);
}

}  // namespace integration
