#include "gpulimit/cupti_trace/kernel_line.h"

#include <algorithm>
#include <cstdio>

namespace gpulimit::cupti_trace {

std::size_t sanitize_name(std::string_view name, char* out, std::size_t capacity) {
  if (name.empty()) name = kUnnamedKernel;
  const std::size_t size = std::min(name.size(), capacity);
  for (std::size_t i = 0; i < size; ++i) {
    const auto byte = static_cast<unsigned char>(name[i]);
    // Readers split on single spaces and reject control characters; bytes
    // above 0x7f (UTF-8 in a demangled name) are fine.
    out[i] = byte <= 0x20 || byte == 0x7f ? '_' : name[i];
  }
  return size;
}

TraceLine format_line(const KernelInterval& kernel) {
  TraceLine line;
  const int numbers = std::snprintf(line.bytes, sizeof line.bytes, "%d %u %llu %llu %llu ",
                                    static_cast<int>(kernel.pid), kernel.device,
                                    static_cast<unsigned long long>(kernel.stream),
                                    static_cast<unsigned long long>(kernel.start_ns),
                                    static_cast<unsigned long long>(kernel.end_ns));
  // Five numbers of at most 20 digits and their spaces always fit.
  line.size = static_cast<std::size_t>(numbers);
  line.size += sanitize_name(kernel.name, line.bytes + line.size,
                             std::min(kMaxNameBytes, sizeof line.bytes - line.size - 1));
  line.bytes[line.size++] = '\n';
  return line;
}

}  // namespace gpulimit::cupti_trace
