// Sizes as people write them on command lines: 512M, 10G.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace workloads {

// Plain bytes, or a whole number with a binary suffix K, M, G or T (either
// case): "10G" is 10 << 30. Fractions, other suffixes and values that do not
// fit in 64 bits are refused. The grammar is gpulimit's own (GPULIMIT_MEM,
// --mem) and the simulator's (FAKECUDA_MEM), so one string means one size
// everywhere.
std::optional<uint64_t> parse_byte_size(std::string_view text);

}  // namespace workloads
