// The limits a process runs under, from its environment and the CLI's
// flags: limits_from_environment (what libgpulimit.so reads at attach, HAMi's
// variables included), limits_from_command_line and compute_limits_asked
// (what `gpulimit run` checks). The input is one line per entry: NAME=value
// for the environment, or "-Nvalue" for the flag of option row N (0-7).
// Asserts that a refusal says what is wrong and leaves the limits as they
// were, and that on success what the CLI writes for the job reads back as
// the same limits.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "gpulimit/options/environment.h"

namespace {

using namespace gpulimit::options;

struct Input {
  std::vector<std::string> environment;
  std::vector<std::string> flag_text;  // owns what `flags` points into
  FlagValues flags;
};

Input split(std::string_view text) {
  Input input;
  std::vector<std::pair<std::size_t, std::size_t>> flag_rows;  // row, index in flag_text
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (line.size() >= 2 && line[0] == '-' && line[1] >= '0' &&
        line[1] < static_cast<char>('0' + kOptionCount)) {
      input.flag_text.emplace_back(line.substr(2));
      flag_rows.emplace_back(static_cast<std::size_t>(line[1] - '0'), input.flag_text.size() - 1);
    } else {
      input.environment.emplace_back(line);
    }
  }
  for (const auto& [row, index] : flag_rows)
    input.flags[row] = input.flag_text[index];
  return input;
}

std::vector<char*> block(std::vector<std::string>& entries) {
  std::vector<char*> envp;
  for (std::string& entry : entries)
    envp.push_back(entry.data());
  envp.push_back(nullptr);
  return envp;
}

// What the CLI writes for a job with `limits` reads back as `limits`.
void check_round_trip(const Limits& limits) {
  std::vector<std::string> assignments;
  FUZZ_CHECK(limits_to_environment(limits, assignments));
  std::vector<char*> envp = block(assignments);
  Limits read;
  std::string error;
  FUZZ_CHECK(limits_from_environment(envp.data(), read, error));
  FUZZ_CHECK(read == limits);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Environment entries and argv are C strings.
  if (text.find('\0') != std::string_view::npos) return 0;
  Input input = split(text);
  std::vector<char*> envp = block(input.environment);

  Limits from_environment;
  std::string error;
  if (limits_from_environment(envp.data(), from_environment, error)) {
    check_round_trip(from_environment);
  } else {
    FUZZ_CHECK(!error.empty());
    FUZZ_CHECK(from_environment == Limits{});  // untouched
  }

  Limits from_command_line;
  error.clear();
  if (limits_from_command_line(envp.data(), input.flags, from_command_line, error)) {
    check_round_trip(from_command_line);
  } else {
    FUZZ_CHECK(!error.empty());
  }

  std::string source;
  if (compute_limits_asked(envp.data(), input.flags, source)) FUZZ_CHECK(!source.empty());
  return 0;
}
