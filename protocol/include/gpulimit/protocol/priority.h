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

}  // namespace gpulimit::protocol
