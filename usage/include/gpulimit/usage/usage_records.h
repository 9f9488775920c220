// What gpulimitd records of each tenant it served, for `gpulimit usage`:
// who, what, where, from when to when, and what it used there. One record
// per tenant per server run; a server restarted numbers its tenants anew,
// so a record is keyed by (run, number).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpulimit::usage {

// How a tenant's record was closed.
inline constexpr const char* kEndedLeft = "left";        // its last process left
// An orphan (its job's main process gone) that gpulimitd killed by policy.
inline constexpr const char* kEndedOrphanKilled = "killed-orphan";
inline constexpr const char* kEndedStopped = "stopped";  // the server stopped while it ran
inline constexpr const char* kEndedLost = "lost";  // the server died while it ran: found at the
                                                   // next start, ended at its last update

// One device a tenant used.
struct DeviceUsage {
  std::string uuid;          // "GPU-..."
  uint64_t held_ns = 0;      // its GPU time: the token held, and late drains after ack timeouts
  uint64_t peak_bytes = 0;   // the most memory its ledger counted there, as sampled
  double byte_seconds = 0;   // memory held over time, integrated between samples
  uint64_t oom_denials = 0;  // allocations refused at its cap
  friend bool operator==(const DeviceUsage&, const DeviceUsage&) = default;
};

// A device's figures in the units gpulimit usage reports.
inline double gpu_seconds(const DeviceUsage& device) {
  return static_cast<double>(device.held_ns) / 1e9;
}
inline double gib_hours(const DeviceUsage& device) {
  return device.byte_seconds / (1024.0 * 1024 * 1024) / 3600;
}

struct TenantUsage {
  int64_t run = 0;      // the server run: its start, ns since the epoch
  uint32_t number = 0;  // the server's number for the tenant in that run
  std::string tenant;   // its id
  uint32_t uid = 0;
  std::string user;
  std::vector<std::string> groups;  // the user's groups, primary first
  std::string command;
  int64_t started_ns = 0;  // wall clock, ns since the epoch
  int64_t updated_ns = 0;  // when the record was last written
  std::optional<int64_t> ended_ns;
  std::string ended;  // kEnded*, empty while it runs
  std::vector<DeviceUsage> devices;
  friend bool operator==(const TenantUsage&, const TenantUsage&) = default;
};

}  // namespace gpulimit::usage
