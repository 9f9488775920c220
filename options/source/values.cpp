#include "gpulimit/options/values.h"

#include <sys/un.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "gpulimit/byte_size.h"
#include "gpulimit/options/option_table.h"
#include "no_throw.h"

namespace gpulimit::options {
namespace {

constexpr std::size_t kMaxTenantIdLength = 64;

static_assert(kMaxSocketPathLength + 1 == sizeof(sockaddr_un::sun_path));

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Digits only (no sign, no space), at most `max`.
bool parse_decimal(std::string_view text, uint64_t max, uint64_t& out) {
  if (!all_digits(text)) return false;
  uint64_t value = 0;
  for (const char c : text) {
    value = value * 10 + static_cast<uint64_t>(c - '0');
    if (value > max) return false;
  }
  out = value;
  return true;
}

// Digits with an optional K/M/G/T suffix: a size in form, whatever its value.
bool shaped_like_size(std::string_view text) {
  if (!text.empty() && std::string_view("KMGTkmgt").find(text.back()) != std::string_view::npos)
    text.remove_suffix(1);
  return all_digits(text);
}

std::string with_size_examples(std::string_view reason) {
  std::string text(reason);
  text += " (examples: ";
  text += option(OptionId::kMem).examples;
  text += ')';
  return text;
}

std::string with_list_example(std::string_view reason) {
  std::string text(reason);
  text += " (example: ";
  text += option(OptionId::kDeviceMem).examples;
  text += ')';
  return text;
}

std::string quoted(std::string_view text) {
  std::string result = "'";
  result += text;
  result += '\'';
  return result;
}

std::string with_sm_examples(std::string_view reason) {
  std::string text(reason);
  text += " (examples: ";
  text += option(OptionId::kSm).examples;
  text += ')';
  return text;
}

// "30" or "30%": a whole number up to 100, zero included.
bool parse_percent_number(std::string_view text, unsigned& out) {
  if (!text.empty() && text.back() == '%') text.remove_suffix(1);
  uint64_t percent = 0;
  if (!parse_decimal(text, 100, percent)) return false;
  out = static_cast<unsigned>(percent);
  return true;
}

bool is_tenant_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '.' || c == '_' ||
         c == '-';
}

}  // namespace

bool all_digits(std::string_view text) noexcept {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_digit);
}

bool parse_amount(std::string_view text, Amount& out, std::string& reason) noexcept {
  return detail::without_exceptions(reason, [&] {
    if (!text.empty() && text.back() == '%') {
      uint64_t percent = 0;
      if (!parse_decimal(text.substr(0, text.size() - 1), 100, percent) || percent == 0) {
        reason = "not a percentage from 1% to 100%";
        return false;
      }
      out = Amount{Amount::Kind::kPercent, percent};
      return true;
    }
    const std::optional<uint64_t> bytes = parse_byte_size(text);
    if (!bytes) {
      reason = shaped_like_size(text) ? "too large for 64 bits" : with_size_examples("not a size");
      return false;
    }
    if (*bytes == 0) {
      reason = with_size_examples("zero is not a cap");
      return false;
    }
    out = Amount{Amount::Kind::kBytes, *bytes};
    return true;
  });
}

bool parse_device_index(std::string_view text, unsigned& out) noexcept {
  // One spelling per device: "01" would make "0=1G,01=2G" two entries for
  // one device, or CUDA_DEVICE_MEMORY_LIMIT_1 and _01 two variables for it.
  if (text.size() > 1 && text.front() == '0') return false;
  uint64_t index = 0;
  if (!parse_decimal(text, kMaxDeviceIndex, index)) return false;
  out = static_cast<unsigned>(index);
  return true;
}

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool parse_device_uuid(std::string_view text, DeviceUuid& out) noexcept {
  if (!text.starts_with("GPU-") && !text.starts_with("MIG-")) return false;
  text.remove_prefix(4);
  DeviceUuid uuid{};
  size_t nibbles = 0;
  for (const char c : text) {
    if (c == '-') continue;
    const int digit = hex_digit(c);
    if (digit < 0 || nibbles == 2 * uuid.size()) return false;
    uuid[nibbles / 2] = static_cast<unsigned char>(uuid[nibbles / 2] << 4 | digit);
    ++nibbles;
  }
  if (nibbles != 2 * uuid.size() || text.front() == '-' || text.back() == '-') return false;
  out = uuid;
  return true;
}

std::string format_device_uuid(const DeviceUuid& uuid) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text = "GPU-";
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += kHex[uuid[i] >> 4];
    text += kHex[uuid[i] & 0xf];
  }
  return text;
}

bool parse_device_amounts(std::string_view text, MemoryLimits& out, std::string& reason) noexcept {
  return detail::without_exceptions(reason, [&] {
    if (text.empty()) {
      reason = with_list_example("an empty list");
      return false;
    }
    std::map<unsigned, Amount> by_device;
    std::map<DeviceUuid, Amount> by_uuid;
    for (;;) {
      const std::size_t comma = text.find(',');
      const std::string_view entry = text.substr(0, comma);
      if (entry.empty()) {
        reason = with_list_example("an empty entry in the list");
        return false;
      }
      const std::size_t equals = entry.find('=');
      if (equals == std::string_view::npos) {
        reason = with_list_example(quoted(entry) + " is not DEVICE=SIZE");
        return false;
      }
      const std::string_view device_text = entry.substr(0, equals);
      unsigned index = 0;
      DeviceUuid uuid{};
      const bool is_index = parse_device_index(device_text, index);
      if (!is_index && !parse_device_uuid(device_text, uuid)) {
        reason = quoted(device_text) + " is not a device index (0 to " +
                 std::to_string(kMaxDeviceIndex) + ") or a GPU's UUID (GPU-...)";
        return false;
      }
      const std::string device = is_index ? std::to_string(index) : std::string(device_text);
      Amount amount;
      std::string amount_reason;
      if (!parse_amount(entry.substr(equals + 1), amount, amount_reason)) {
        reason = "device " + device + ": " + amount_reason;
        return false;
      }
      if (is_index ? !by_device.emplace(index, amount).second
                   : !by_uuid.emplace(uuid, amount).second) {
        reason = "device " + device + " is given twice";
        return false;
      }
      if (comma == std::string_view::npos) break;
      text.remove_prefix(comma + 1);
    }
    out.by_device = std::move(by_device);
    out.by_uuid = std::move(by_uuid);
    return true;
  });
}

bool parse_device_amounts(std::string_view text, std::map<unsigned, Amount>& out,
                          std::string& reason) noexcept {
  MemoryLimits parsed;
  if (!parse_device_amounts(text, parsed, reason)) return false;
  if (!parsed.by_uuid.empty()) {
    reason = "devices are named by index here, not by UUID";
    return false;
  }
  out = std::move(parsed.by_device);
  return true;
}

bool parse_tenant_id(std::string_view text, std::string& reason) noexcept {
  return detail::without_exceptions(reason, [&] {
    if (text.empty() || text.size() > kMaxTenantIdLength ||
        !std::all_of(text.begin(), text.end(), is_tenant_char)) {
      reason = "not a tenant id (1 to 64 characters of A-Z a-z 0-9 . _ -)";
      return false;
    }
    return true;
  });
}

bool parse_absolute_path(std::string_view text, std::string& reason) noexcept {
  return detail::without_exceptions(reason, [&] {
    if (text.empty() || text.front() != '/') {
      reason = "not an absolute path";
      return false;
    }
    return true;
  });
}

bool parse_sm_percent(std::string_view text, unsigned& out, std::string& reason) noexcept {
  return detail::without_exceptions(reason, [&] {
    unsigned percent = 0;
    if (!parse_percent_number(text, percent)) {
      reason = with_sm_examples("not a percentage from 1 to 100");
      return false;
    }
    if (percent == 0) {
      reason = with_sm_examples("zero is not a cap");
      return false;
    }
    out = percent;
    return true;
  });
}

bool parse_hami_sm_limit(std::string_view text, unsigned& out, std::string& reason) noexcept {
  return detail::without_exceptions(reason, [&] {
    unsigned percent = 0;
    if (!parse_percent_number(text, percent)) {
      reason = "not a percentage from 0 (no cap) to 100";
      return false;
    }
    out = percent;
    return true;
  });
}

bool parse_weight(std::string_view text, unsigned& out, std::string& reason) noexcept {
  return detail::without_exceptions(reason, [&] {
    uint64_t weight = 0;
    if (!parse_decimal(text, kMaxWeight, weight) || weight == 0) {
      reason = "not a whole number from 1 to " + std::to_string(kMaxWeight);
      return false;
    }
    out = static_cast<unsigned>(weight);
    return true;
  });
}

bool parse_priority(std::string_view text, Priority& out, std::string& reason) noexcept {
  return detail::without_exceptions(reason, [&] {
    for (const Priority priority : {Priority::kHigh, Priority::kNormal, Priority::kLow}) {
      if (text == priority_name(priority)) {
        out = priority;
        return true;
      }
    }
    reason = "not a priority (high, normal or low)";
    return false;
  });
}

std::string_view priority_name(Priority priority) noexcept {
  switch (priority) {
    case Priority::kLow:
      return "low";
    case Priority::kNormal:
      return "normal";
    case Priority::kHigh:
      return "high";
  }
  return "normal";
}

bool parse_socket_path(std::string_view text, std::string& reason) noexcept {
  return detail::without_exceptions(reason, [&] {
    if (!parse_absolute_path(text, reason)) return false;
    if (text.size() > kMaxSocketPathLength) {
      reason = "longer than " + std::to_string(kMaxSocketPathLength) +
               " bytes, the most a unix socket's path can have";
      return false;
    }
    return true;
  });
}

}  // namespace gpulimit::options
