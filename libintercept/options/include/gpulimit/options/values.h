// The grammar of each kind of option value (ValueKind). A parser returns
// false and sets `reason` to what is wrong with the text; the caller names
// where the text came from ("GPULIMIT_MEM=10Q: " or "--mem 10Q: ").
//
//   AMOUNT   SIZE | PERCENT
//   SIZE     what gpulimit::parse_byte_size reads, above zero: 4096, 512M, 10g
//   PERCENT  a whole number from 1 to 100, then '%': 50%
//   LIST     INDEX=AMOUNT[,INDEX=AMOUNT...], each index once: 0=10G,1=20%
//   INDEX    a device ordinal from 0 to kMaxDeviceIndex, no leading zeros
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "gpulimit/options/limits.h"

namespace gpulimit::options {

bool parse_amount(std::string_view text, Amount& out, std::string& reason) noexcept;

bool parse_device_amounts(std::string_view text, std::map<unsigned, Amount>& out,
                          std::string& reason) noexcept;

bool parse_device_index(std::string_view text, unsigned& out) noexcept;

// [A-Za-z0-9._-]{1,64}: safe in a file name, a log line and a shell word.
bool parse_tenant_id(std::string_view text, std::string& reason) noexcept;

bool parse_absolute_path(std::string_view text, std::string& reason) noexcept;

}  // namespace gpulimit::options
