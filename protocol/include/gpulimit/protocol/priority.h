// The option table's priority (what --priority and GPULIMIT_PRIORITY say)
// as the wire spells it. One mapping for the library, which sends it, and
// gpulimitd's policy file, which grants it.
#pragma once

#include "gpulimit/options/limits.h"
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

// The one spelling of each priority in text (the status JSON, gpulimitd's
// log), the option table's: "low", "normal", "high".
constexpr const char* priority_name(Priority priority) noexcept {
  switch (priority) {
    case Priority::kLow:
      return "low";
    case Priority::kHigh:
      return "high";
    case Priority::kNormal:
      break;
  }
  return "normal";
}

}  // namespace gpulimit::protocol
