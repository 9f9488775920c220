// The grammar of each kind of option value (ValueKind). A parser returns
// false and sets `reason` to what is wrong with the text; the caller names
// where the text came from ("GPULIMIT_MEM=10Q: " or "--mem 10Q: ").
//
//   AMOUNT   SIZE | PERCENT
//   SIZE     what gpulimit::parse_byte_size reads, above zero: 4096, 512M, 10g
//   PERCENT  a whole number from 1 to 100, then '%': 50%
//   LIST     DEVICE=AMOUNT[,DEVICE=AMOUNT...], each device once: 0=10G,1=20%
//   DEVICE   INDEX | UUID
//   INDEX    a device ordinal from 0 to kMaxDeviceIndex, no leading zeros
//   UUID     GPU- or MIG- and 32 hex digits, dashes anywhere between them,
//            as NVML and nvidia-smi -L write them (the prefix is not kept:
//            the 16 bytes name the device)
//   SM       a whole number from 1 to 100, '%' optional: 30, 30%
//   WEIGHT   a whole number from 1 to kMaxWeight: 2
//   PRIORITY high, normal or low, in lower case
//   SOCKET   an absolute path of at most kMaxSocketPathLength bytes
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "gpulimit/options/limits.h"

namespace gpulimit::options {

// At least one character, each of them 0 to 9: how every number above is
// written (no sign, no space), and the numbers of other grammars too.
bool all_digits(std::string_view text) noexcept;

bool parse_amount(std::string_view text, Amount& out, std::string& reason) noexcept;

// A LIST into `out`'s by_device and by_uuid (the rest of `out` untouched).
bool parse_device_amounts(std::string_view text, MemoryLimits& out, std::string& reason) noexcept;
// A LIST of INDEX entries only.
bool parse_device_amounts(std::string_view text, std::map<unsigned, Amount>& out,
                          std::string& reason) noexcept;

// The by_device and by_uuid entries of `memory` as a LIST (render.cpp).
std::string format_device_amounts(const MemoryLimits& memory);

bool parse_device_uuid(std::string_view text, DeviceUuid& out) noexcept;
// GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, in lower case.
std::string format_device_uuid(const DeviceUuid& uuid);

bool parse_device_index(std::string_view text, unsigned& out) noexcept;

// [A-Za-z0-9._-]{1,64}: safe in a file name, a log line and a shell word.
bool parse_tenant_id(std::string_view text, std::string& reason) noexcept;

bool parse_absolute_path(std::string_view text, std::string& reason) noexcept;

// The hard cap of GPU time, in percent. Zero is refused as --mem 0 is: to
// have no cap, leave the option out.
bool parse_sm_percent(std::string_view text, unsigned& out, std::string& reason) noexcept;

// HAMi's CUDA_DEVICE_SM_LIMIT: as parse_sm_percent, except that 0 is HAMi's
// way of saying "no cap" and reads as 0.
bool parse_hami_sm_limit(std::string_view text, unsigned& out, std::string& reason) noexcept;

bool parse_weight(std::string_view text, unsigned& out, std::string& reason) noexcept;

bool parse_priority(std::string_view text, Priority& out, std::string& reason) noexcept;
// The one spelling of each priority: "high", "normal", "low".
std::string_view priority_name(Priority priority) noexcept;

// sockaddr_un holds 108 bytes, the terminating NUL included.
inline constexpr std::size_t kMaxSocketPathLength = 107;

bool parse_socket_path(std::string_view text, std::string& reason) noexcept;

}  // namespace gpulimit::options
