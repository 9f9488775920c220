// The limits one process runs under, as the options give them: what the
// library enforces and what the CLI hands to a job.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// A GPU as the driver names it for good: the 16 bytes of its UUID
// (cuDeviceGetUuid_v2; NVML writes them GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx).
using DeviceUuid = std::array<unsigned char, 16>;

// Per-device caps are given by CUDA ordinal (--device-mem 1=4G), and an
// ordinal names a GPU only in one process's view: a child that narrows
// CUDA_VISIBLE_DEVICES (a launcher, per rank) numbers the same GPUs anew. So
// the first process that can see the GPUs binds each ordinal to the GPU it
// names there, and hands the caps on by UUID (--device-mem GPU-...=4G).
struct MemoryLimits {
  std::optional<Amount> all;             // every device (--mem)
  std::map<unsigned, Amount> by_device;  // by CUDA ordinal, until bound
  std::map<DeviceUuid, Amount> by_uuid;  // by GPU: given so, or bound

  bool empty() const noexcept { return !all && by_device.empty() && by_uuid.empty(); }
  // The ordinal's own entry, else the cap for every device, else none.
  std::optional<Amount> for_device(unsigned device) const noexcept;
  // The cap of the GPU `uuid`, CUDA ordinal `ordinal` of this process: its
  // UUID's entry, else its ordinal's, else the cap for every device.
  std::optional<Amount> for_gpu(const DeviceUuid& uuid, unsigned ordinal) const noexcept;
  // The least any device may have, in bytes of a device of `device_total`.
  std::optional<uint64_t> smallest(uint64_t device_total) const noexcept;
  // The cap in bytes of the GPU `uuid` (of `device_total` bytes) before the
  // process knows its ordinal (NVML before cuInit): its UUID's entry, else,
  // while any entry is still by ordinal, the least of them all, else the
  // cap for every device.
  std::optional<uint64_t> cap_before_binding(const DeviceUuid& uuid,
                                             uint64_t device_total) const noexcept;

  // Binds the ordinal entries to the GPUs they name in this process
  // (`visible[i]` is CUDA ordinal i), moving them to by_uuid; entries of
  // ordinals past the visible GPUs name nothing and are dropped. False, and
  // nothing changed, when an ordinal's entry and its GPU's UUID entry
  // disagree.
  bool bind(const std::vector<DeviceUuid>& visible, std::string& reason);

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
