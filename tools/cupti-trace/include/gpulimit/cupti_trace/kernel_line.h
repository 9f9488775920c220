// One kernel as a line of gpulimit's kernel trace, format version 1
// (tools/trace/README.md):
//
//   <pid> <device> <stream> <start_ns> <end_ns> <name>\n
//
// Formatting writes into a fixed buffer and never allocates: it runs in
// CUPTI's buffer-completion callback, inside someone else's process.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpulimit::cupti_trace {

// Longer names are cut: templated C++ kernels can have mangled names of
// several kilobytes, and a line must stay one write() of bounded size.
inline constexpr std::size_t kMaxNameBytes = 1024;
// Five decimal numbers of at most 20 digits, six separators, the name.
inline constexpr std::size_t kMaxLineBytes = 5 * 20 + 6 + kMaxNameBytes;

// What an unnamed kernel is called: the format has no empty fields.
inline constexpr std::string_view kUnnamedKernel = "unnamed";

struct KernelInterval {
  pid_t pid = 0;
  uint32_t device = 0;  // physical index
  uint64_t stream = 0;
  uint64_t start_ns = 0;  // CLOCK_MONOTONIC
  uint64_t end_ns = 0;    // CLOCK_MONOTONIC, >= start_ns
  std::string_view name;  // as CUPTI gives it; sanitised when formatted
};

// `name` with every space and control character (bytes below 0x20, and 0x7f)
// replaced by '_', cut to `capacity` bytes; kUnnamedKernel when empty.
// Returns the bytes written to `out`.
std::size_t sanitize_name(std::string_view name, char* out, std::size_t capacity);

struct TraceLine {
  char bytes[kMaxLineBytes];
  std::size_t size = 0;

  std::string_view text() const { return {bytes, size}; }
};

// The line of `kernel`, newline included.
TraceLine format_line(const KernelInterval& kernel);

}  // namespace gpulimit::cupti_trace
