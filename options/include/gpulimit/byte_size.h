// Sizes as people write them: plain bytes, or a whole number with a binary
// suffix K, M, G or T (either case), so "10G" is 10 << 30. Fractions, other
// suffixes and values that do not fit in 64 bits are refused. gpulimit's
// options (--mem, GPULIMIT_MEM), the simulator (FAKECUDA_MEM) and the
// workloads (--target, --chunk) read sizes with this one function, so one
// string means one size everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpulimit {

inline std::optional<uint64_t> parse_byte_size(std::string_view text) {
  unsigned shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      case 'T':
      case 't':
        shift = 40;
        break;
      default:
        break;
    }
  }
  if (shift != 0) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

}  // namespace gpulimit
