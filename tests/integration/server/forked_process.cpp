#include "forked_process.h"

#include "gpulimit/testing/pipe_io.h"

namespace server_test {
namespace {

using gpulimit::testing::next_line;
using gpulimit::testing::write_all;

}  // namespace

void ParentLine::say(std::string_view line) {
  write_all(out_, std::string(line) + "\n");
}

std::string ParentLine::hear(std::chrono::milliseconds timeout) {
  return next_line(in_, buffered_, "", timeout);
}

ForkedProcess::ForkedProcess(const std::function<int(ParentLine&)>& body)
    : process_(gpulimit::testing::Process::fork([&body](int from_test, int to_test) {
        ParentLine line(from_test, to_test);
        return body(line);
      })) {}

void ForkedProcess::say(std::string_view line) {
  process_.say(line);
}

std::string ForkedProcess::expect(std::string_view prefix, std::chrono::milliseconds timeout) {
  return process_.expect(prefix, timeout);
}

void ForkedProcess::kill_now() {
  process_.kill_now();
}

int ForkedProcess::wait_for_exit(std::chrono::milliseconds timeout) {
  if (!process_.started() || process_.reaped()) return -1;
  const auto status = process_.wait_for_exit(timeout);
  return status ? status->shell() : -1;
}

}  // namespace server_test
