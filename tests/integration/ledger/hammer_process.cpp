#include "hammer_process.h"

#include <signal.h>

#include <charconv>

namespace ledger_test {
namespace {

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
  gpulimit::testing::Launch launch;
  launch.argv = {LEDGER_HAMMER_PATH, dir, tenant};
  launch.argv.insert(launch.argv.end(), options.begin(), options.end());
  launch.in = gpulimit::testing::Stream::pipe();
  launch.out = gpulimit::testing::Stream::pipe();
  launch.dies_with_test = true;  // no helper outlives a crashed test
  process_ = gpulimit::testing::Process(launch);
}

void HammerProcess::send(std::string_view command) {
  process_.say(command);
}

std::string HammerProcess::expect(std::string_view prefix, std::chrono::milliseconds timeout) {
  return process_.expect(prefix, timeout);
}

std::string HammerProcess::ask(std::string_view command, std::string_view answer_prefix) {
  send(command);
  return expect(answer_prefix);
}

void HammerProcess::kill_now() {
  process_.kill_now();
}

bool HammerProcess::wait_until_stopped(std::chrono::milliseconds timeout) {
  return process_.wait_until_stopped(timeout);
}

void HammerProcess::resume() {
  process_.signal(SIGCONT);
}

int HammerProcess::exit_now(std::chrono::milliseconds timeout) {
  send("exit");
  if (const auto status = process_.wait_for_exit(timeout)) return status->shell();
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
