// The option table's priority (what --priority and GPULIMIT_PRIORITY say)
// as the wire spells it, and back. One mapping for the library, which sends it, and
// gpulimitd's policy file, which grants it.
#pragma once

#include <string_view>

#include "gpulimit/options/limits.h"
#include "gpulimit/options/values.h"
#include "gpulimit/protocol/messages.h"

namespace gpulimit::protocol {

constexpr Priority to_protocol(options::Priority priority) noexcept {
  switch (priority) {
    case options::Priority::kLow:
      return Priority::kLow;
    case options::Priority::kHigh:
      return Priority::kHigh;
    case options::Priority::kNormal:
      break;
  }
  return Priority::kNormal;
}

constexpr options::Priority from_protocol(Priority priority) noexcept {
  switch (priority) {
    case Priority::kLow:
      return options::Priority::kLow;
    case Priority::kHigh:
      return options::Priority::kHigh;
    case Priority::kNormal:
      break;
  }
  return options::Priority::kNormal;
}

// The one spelling of each priority in text (the status JSON, gpulimitd's
// log), the option table's: "low", "normal", "high".
inline std::string_view priority_name(Priority priority) noexcept {
  return options::priority_name(from_protocol(priority));
}

}  // namespace gpulimit::protocol
