// The limits one process runs under, as the options give them: what the
// library enforces and what the CLI hands to a job.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace gpulimit::options {

// Device ordinals run from 0 to kMaxDeviceIndex. The ledgers keep one slot
// per ordinal; 64 is more GPUs than one machine holds.
inline constexpr unsigned kMaxDeviceIndex = 63;

inline constexpr std::string_view kDefaultLedgerDir = "/dev/shm";

// An amount of one device's memory: bytes, or a percentage of the device.
struct Amount {
  enum class Kind : unsigned char { kBytes, kPercent };

  Kind kind = Kind::kBytes;
  uint64_t value = 0;  // bytes (> 0), or a percentage (1 to 100)

  // The cap in bytes on a device of `device_total` bytes, rounded down. A
  // byte cap is returned as given, also when above the device's size: then
  // the device is the limit.
  uint64_t resolve(uint64_t device_total) const noexcept;

  friend bool operator==(const Amount&, const Amount&) = default;
};

struct MemoryLimits {
  std::optional<Amount> all;             // every device (--mem)
  std::map<unsigned, Amount> by_device;  // by device ordinal (--device-mem)

  bool empty() const noexcept { return !all && by_device.empty(); }
  // The device's own entry, else the cap for every device, else none.
  std::optional<Amount> for_device(unsigned device) const noexcept;

  friend bool operator==(const MemoryLimits&, const MemoryLimits&) = default;
};

struct Limits {
  MemoryLimits memory;
  std::string tenant;  // empty when none is given
  std::string ledger_dir{kDefaultLedgerDir};

  friend bool operator==(const Limits&, const Limits&) = default;
};

}  // namespace gpulimit::options
