// gpulimitd's status JSON (the schema is in status_table.h and
// limiter-server/README.md) as `gpulimit top` reads it: every field it
// shows, checked, and the newer per-tenant figures optional, so that top
// works with servers from before they existed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpulimit::cli {

struct TopServer {
  int64_t pid = 0;
  std::string mode;  // "user" or "system"
  std::string socket;
  uint64_t quantum_us = 0;
  double uptime_s = 0;
};

struct TopDevice {
  uint64_t board_index = 0;
  std::string uuid;
  std::optional<std::string> holder;  // tenant id
  uint64_t waiting = 0;
};

// A tenant's figures on one device. Absent or null: not known (shown "-").
struct TopTenantDevice {
  std::string uuid;
  std::optional<uint64_t> memory_used;
  std::optional<uint64_t> memory_cap;  // none: no cap on this device
  double share_target = 0;             // fractions of the device's time
  double share_achieved = 0;
  std::optional<uint64_t> wait_ns;  // total time spent waiting for the token
  std::optional<uint64_t> grants;
  std::optional<uint64_t> revokes;
  std::optional<uint64_t> overruns;
  std::optional<uint64_t> oom_denials;
};

struct TopTenant {
  std::string tenant;
  std::string user;
  std::optional<std::string> command;
  std::vector<int64_t> pids;
  std::vector<TopTenantDevice> devices;
};

struct TopSnapshot {
  TopServer server;
  std::vector<TopDevice> devices;
  std::vector<TopTenant> tenants;
};

// False with `error` set to one line when `json` is not of the schema; `out`
// is then untouched.
bool parse_top_snapshot(std::string_view json, TopSnapshot& out, std::string& error);

}  // namespace gpulimit::cli
