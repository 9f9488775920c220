// What gpulimitd reports of itself: the status schema
// (gpulimit/protocol/status.h) it fills for a StatusReply, with the figures
// only its metrics show, and the reply's JSON text.
#pragma once

#include <compare>
#include <cstddef>
#include <map>
#include <string>

#include "gpulimit/protocol/status.h"
#include "gpulimit/server/loop/hello_validation.h"
#include "gpulimit/server/metrics/tenant_statistics.h"
#include "gpulimit/server/policy/policy.h"  // format_gpu_uuid

namespace gpulimit::server {

// A tenant on a device, by the names the status gives them.
struct TenantOnDevice {
  std::string tenant;  // its id
  std::string uuid;    // the device's, "GPU-..."

  friend auto operator<=>(const TenantOnDevice&, const TenantOnDevice&) = default;
};

// What one user's tenants used since the server started, running and ended
// (usage_recorder.h).
struct UserUsage {
  double gpu_seconds = 0;
  double gib_hours = 0;
};

// gpulimitd at one moment, as the status and the metrics show it.
struct StatusSnapshot {
  protocol::status::Report report;
  // How long each tenant waited for each device's token: for the metrics
  // only, not in the JSON.
  std::map<TenantOnDevice, WaitHistogram> waits;
  // Per user, with a usage database (--usage-db); empty without. Metrics only.
  std::map<std::string, UserUsage> usage;
};

// The JSON text, at most `max_bytes` long: tenants are left out from the end
// until it fits (`left_out` says how many).
std::string render_status(const protocol::status::Report& report, std::size_t max_bytes,
                          std::size_t& left_out);

}  // namespace gpulimit::server
