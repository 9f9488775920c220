#include "gpulimit/options/limits.h"

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

}  // namespace gpulimit::options
