// The machine-readable output of a workload: one line of space-separated
// key=value pairs on stdout. Keys are lower_snake_case identifiers; values
// never contain whitespace or '=' (any such character is written as '_'), so
// splitting on spaces and then on the first '=' parses every line. The keys
// each workload prints are listed in tests/workloads/README.md; tests and
// benchmarks depend on them, so add keys freely but do not rename them.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace workloads {

class ReportLine {
 public:
  ReportLine& add(std::string_view key, std::string_view value);
  ReportLine& add(std::string_view key, const char* value) {
    return add(key, std::string_view(value));
  }
  ReportLine& add(std::string_view key, const std::string& value) {
    return add(key, std::string_view(value));
  }
  template <std::integral Integer>
  ReportLine& add(std::string_view key, Integer value) {
    return add(key, std::string_view(std::to_string(value)));
  }
  // A comma-separated list: "stream_gpu_ns=1000,1010".
  ReportLine& add(std::string_view key, std::span<const uint64_t> values);

  // Writes the line to stdout and flushes it, so that a reader on the other
  // end of a pipe sees it at once (the allocator's --hold line depends on it).
  void print() const;

 private:
  std::string text_;
};

}  // namespace workloads
