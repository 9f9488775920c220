#include "probe_process.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gate_test {

ProbeProcess::ProbeProcess(const std::vector<std::string>& argv, const Environment& environment,
                           std::string stderr_path)
    : stderr_path_(std::move(stderr_path)) {
  gpulimit::testing::Launch launch;
  launch.argv = argv;
  launch.environment = gpulimit::testing::this_environment(
      environment, {"GPULIMIT_", "FAKECUDA_", "LD_PRELOAD=", "CUDA_VISIBLE_DEVICES="});
  launch.in = gpulimit::testing::Stream::pipe();
  launch.out = gpulimit::testing::Stream::pipe();
  launch.err = gpulimit::testing::Stream::file(stderr_path_);
  process_ = gpulimit::testing::Process(launch);
}

ProbeProcess::~ProbeProcess() {
  process_.close_stdin();
  // Then process_ kills it if it has not ended.
  wait(std::chrono::seconds(1));
}

void ProbeProcess::send(const std::string& line) {
  if (!process_.say(line)) throw std::runtime_error("cannot write to the probe");
}

std::optional<std::string> ProbeProcess::read_line(std::chrono::milliseconds timeout) {
  return process_.read_line(timeout);
}

std::optional<std::string> ProbeProcess::ask(const std::string& line,
                                             std::chrono::milliseconds timeout) {
  send(line);
  return read_line(timeout);
}

int ProbeProcess::wait(std::chrono::milliseconds timeout) {
  const auto status = process_.wait_for_exit(timeout);
  return status ? status->shell() : -1;
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
