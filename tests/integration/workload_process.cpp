#include "workload_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <charconv>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

namespace integration {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(10);

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

WorkloadProcess::WorkloadProcess(const std::string& program, const std::vector<std::string>& args,
                                 const Environment& environment) {
  if (output_.path().empty()) return;
  out_path_ = output_.path() + "/stdout";
  err_path_ = output_.path() + "/stderr";
  gpulimit::testing::Launch launch;
  launch.argv = {program};
  launch.argv.insert(launch.argv.end(), args.begin(), args.end());
  launch.environment = gpulimit::testing::this_environment(environment);
  launch.out = gpulimit::testing::Stream::file(out_path_);
  launch.err = gpulimit::testing::Stream::file(err_path_);
  process_ = gpulimit::testing::Process(launch);
}

std::string WorkloadProcess::read_stdout() const {
  return read_file(out_path_);
}

bool WorkloadProcess::wait_for_output(std::string_view text, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (process_.started() && !process_.reaped()) {
    if (read_stdout().find(text) != std::string::npos) return true;
    if (process_.wait_for_exit(std::chrono::milliseconds(0))) break;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
  return read_stdout().find(text) != std::string::npos;
}

void WorkloadProcess::kill_now() {
  process_.signal(SIGKILL);
}

WorkloadRun WorkloadProcess::wait(std::chrono::milliseconds timeout) {
  WorkloadRun run;
  if (process_.started()) {
    std::optional<gpulimit::testing::ExitStatus> status = process_.wait_for_exit(timeout);
    if (!status && !process_.reaped()) {
      run.timed_out = true;
      status = process_.kill_now();
    }
    if (status) run.exit_status = status->shell();
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
