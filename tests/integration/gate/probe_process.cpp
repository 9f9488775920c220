#include "probe_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "gpulimit/testing/child_process.h"

extern char** environ;

namespace gate_test {
namespace {

bool inherited(const std::string& assignment) {
  for (const char* prefix : {"GPULIMIT_", "FAKECUDA_", "LD_PRELOAD=", "CUDA_VISIBLE_DEVICES="})
    if (assignment.rfind(prefix, 0) == 0) return false;
  return true;
}

}  // namespace

ProbeProcess::ProbeProcess(const std::vector<std::string>& argv, const Environment& environment,
                           std::string stderr_path)
    : stderr_path_(std::move(stderr_path)) {
  std::vector<std::string> variables;
  for (char** entry = environ; *entry; ++entry)
    if (inherited(*entry)) variables.emplace_back(*entry);
  for (const auto& [name, value] : environment)
    variables.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& v : variables)
    envp.push_back(v.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> arg_pointers;
  for (std::string& a : args)
    arg_pointers.push_back(a.data());
  arg_pointers.push_back(nullptr);

  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  const int err = open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  pid_ = fork();
  if (pid_ == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err, 2);
    execve(arg_pointers[0], arg_pointers.data(), envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err);
  to_child_ = in[1];
  from_child_ = out[0];
}

ProbeProcess::~ProbeProcess() {
  if (to_child_ >= 0) close(to_child_);
  if (!reaped_ && wait(std::chrono::seconds(1)) < 0) {
    gpulimit::testing::kill_and_reap(pid_);
  }
  close(from_child_);
}

void ProbeProcess::send(const std::string& line) {
  const std::string text = line + "\n";
  if (write(to_child_, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error("cannot write to the probe");
}

std::optional<std::string> ProbeProcess::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (const size_t end = pending_.find('\n'); end != std::string::npos) {
      std::string line = pending_.substr(0, end);
      pending_.erase(0, end + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{from_child_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t got = read(from_child_, buffer, sizeof buffer);
    if (got <= 0) return std::nullopt;
    pending_.append(buffer, static_cast<size_t>(got));
  }
}

std::optional<std::string> ProbeProcess::ask(const std::string& line,
                                             std::chrono::milliseconds timeout) {
  send(line);
  return read_line(timeout);
}

int ProbeProcess::wait(std::chrono::milliseconds timeout) {
  const int status =
      gpulimit::testing::reap_by(pid_, std::chrono::steady_clock::now() + timeout);
  if (status >= 0) reaped_ = true;
  return status;
}

std::string ProbeProcess::stderr_text() const {
  std::ifstream file(stderr_path_);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;)
    out.push_back(w);
  return out;
}

}  // namespace gate_test
