// Limits written back as variables, in the one spelling each value has:
// bytes in the largest binary unit that divides them (10240M is 10G,
// 1536M stays 1536M), devices in ascending order (ordinals, then UUIDs), a GPU-time cap without
// its '%' (30% is 30), priorities in lower case.
#include <cstdint>
#include <string>
#include <utility>

#include "gpulimit/options/environment.h"
#include "gpulimit/options/values.h"
#include "no_throw.h"

namespace gpulimit::options {
namespace {

struct Unit {
  unsigned shift;
  char suffix;
};

constexpr Unit kUnits[] = {{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}};

std::string format_amount(const Amount& amount) {
  if (amount.kind == Amount::Kind::kPercent) return std::to_string(amount.value) + '%';
  for (const Unit& unit : kUnits) {
    const uint64_t mask = (uint64_t{1} << unit.shift) - 1;
    if ((amount.value & mask) == 0) return std::to_string(amount.value >> unit.shift) + unit.suffix;
  }
  return std::to_string(amount.value);
}


std::string assignment(OptionId id, std::string_view value) {
  std::string text(option(id).variable);
  text += '=';
  text += value;
  return text;
}

}  // namespace

std::string format_device_amounts(const MemoryLimits& memory) {
  std::string text;
  const auto add = [&text](const std::string& device, const Amount& amount) {
    if (!text.empty()) text += ',';
    text += device + '=' + format_amount(amount);
  };
  for (const auto& [ordinal, amount] : memory.by_device)
    add(std::to_string(ordinal), amount);
  for (const auto& [uuid, amount] : memory.by_uuid)
    add(format_device_uuid(uuid), amount);
  return text;
}

bool limits_to_environment(const Limits& limits, std::vector<std::string>& out) noexcept {
  std::string error;
  return detail::without_exceptions(error, [&] {
    std::vector<std::string> result;
    if (limits.memory.all)
      result.push_back(assignment(OptionId::kMem, format_amount(*limits.memory.all)));
    if (!limits.memory.by_device.empty() || !limits.memory.by_uuid.empty())
      result.push_back(assignment(OptionId::kDeviceMem, format_device_amounts(limits.memory)));
    const ComputeLimits& compute = limits.compute;
    const ComputeLimits defaults;
    if (compute.sm_percent != defaults.sm_percent)
      result.push_back(assignment(OptionId::kSm, std::to_string(compute.sm_percent)));
    if (compute.weight != defaults.weight)
      result.push_back(assignment(OptionId::kWeight, std::to_string(compute.weight)));
    if (compute.priority != defaults.priority)
      result.push_back(assignment(OptionId::kPriority, priority_name(compute.priority)));
    if (!limits.tenant.empty()) result.push_back(assignment(OptionId::kTenant, limits.tenant));
    if (!limits.ledger_dir.empty() && limits.ledger_dir != kDefaultLedgerDir)
      result.push_back(assignment(OptionId::kLedgerDir, limits.ledger_dir));
    if (!limits.socket.empty()) result.push_back(assignment(OptionId::kSocket, limits.socket));
    out = std::move(result);
    return true;
  });
}

}  // namespace gpulimit::options
