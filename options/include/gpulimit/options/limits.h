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
// How many ordinals that is: the size of a table kept per device ordinal.
inline constexpr int kDeviceOrdinalCount = static_cast<int>(kMaxDeviceIndex) + 1;

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

// A tenant's share of GPU time, enforced by gpulimitd through the launch gate.
enum class Priority : unsigned char { kLow, kNormal, kHigh };

inline constexpr unsigned kMaxWeight = 1000;

struct ComputeLimits {
  unsigned sm_percent = 0;  // hard cap, 1 to 100 % of GPU time; 0: none
  unsigned weight = 1;      // share under contention, 1 to kMaxWeight
  Priority priority = Priority::kNormal;

  friend bool operator==(const ComputeLimits&, const ComputeLimits&) = default;
};

struct Limits {
  MemoryLimits memory;
  ComputeLimits compute;
  // gpulimitd's socket; empty when the process is not gated.
  std::string socket;
  std::string tenant;  // empty when none is given
  std::string ledger_dir{kDefaultLedgerDir};

  friend bool operator==(const Limits&, const Limits&) = default;
};

}  // namespace gpulimit::options
