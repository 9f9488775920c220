#include "gpulimit/options/limits.h"

#include <algorithm>
#include <utility>

#include "gpulimit/options/values.h"

namespace gpulimit::options {

uint64_t Amount::resolve(uint64_t device_total) const noexcept {
  if (kind == Kind::kBytes) return value;
  // total * percent / 100 without the product overflowing: with
  // total = 100q + r, that is q * percent + r * percent / 100 exactly.
  return device_total / 100 * value + device_total % 100 * value / 100;
}

std::optional<Amount> MemoryLimits::for_device(unsigned device) const noexcept {
  const auto entry = by_device.find(device);
  if (entry != by_device.end()) return entry->second;
  return all;
}

std::optional<Amount> MemoryLimits::for_gpu(const DeviceUuid& uuid,
                                            unsigned ordinal) const noexcept {
  const auto entry = by_uuid.find(uuid);
  if (entry != by_uuid.end()) return entry->second;
  return for_device(ordinal);
}

std::optional<uint64_t> MemoryLimits::smallest(uint64_t device_total) const noexcept {
  std::optional<uint64_t> least;
  const auto consider = [&](const Amount& amount) {
    const uint64_t bytes = amount.resolve(device_total);
    least = least ? std::min(*least, bytes) : bytes;
  };
  if (all) consider(*all);
  for (const auto& [ordinal, amount] : by_device)
    consider(amount);
  for (const auto& [uuid, amount] : by_uuid)
    consider(amount);
  return least;
}

std::optional<uint64_t> MemoryLimits::cap_before_binding(const DeviceUuid& uuid,
                                                         uint64_t device_total) const noexcept {
  if (const auto entry = by_uuid.find(uuid); entry != by_uuid.end())
    return entry->second.resolve(device_total);
  if (!by_device.empty()) return smallest(device_total);
  if (all) return all->resolve(device_total);
  return std::nullopt;
}

bool MemoryLimits::bind(const std::vector<DeviceUuid>& visible, std::string& reason) {
  std::map<DeviceUuid, Amount> bound = by_uuid;
  for (const auto& [ordinal, amount] : by_device) {
    if (ordinal >= visible.size()) continue;
    const auto [entry, added] = bound.emplace(visible[ordinal], amount);
    if (!added && entry->second != amount) {
      reason = "device " + std::to_string(ordinal) + " is " + format_device_uuid(visible[ordinal]) +
               ", which is given another cap";
      return false;
    }
  }
  by_uuid = std::move(bound);
  by_device.clear();
  return true;
}

}  // namespace gpulimit::options
