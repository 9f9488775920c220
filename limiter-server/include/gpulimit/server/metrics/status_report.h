// The body of a StatusReply: what `gpulimit status` shows. JSON, with
// exactly these fields (the CLI parses them):
//
// {"server":{"pid":N,"mode":"user"|"system","socket":"...","quantum_us":N,
//            "uptime_s":X,"protocol":1,"metrics":"host:port"|null},
//  "devices":[{"board_index":N,"uuid":"GPU-...","holder":"<tenant id>"|null,"waiting":N}],
//  "tenants":[{"tenant":"id","number":N,"uid":N,"user":"name","pids":[...],
//              "command":"...",
//              "sm_percent":N|null,"weight":N,"priority":"low"|"normal"|"high",
//              "devices":[{"uuid":"GPU-...","memory_used":bytes|null,
//                          "memory_cap":bytes|null,"share_target":x,
//                          "share_achieved":x,"held_ns":N,"wait_ns":N,
//                          "grants":N,"revokes":N,"overruns":N,
//                          "oom_denials":N|null}]}]}
//
// share_achieved: time held over wall time in the last 10 s (or since the
// tenant first wanted the device); share_target: the share the scheduling
// rules give it under the current demand (share_targets.h). command: the tenant's first
// process's command line (process_command.h). wait_ns, grants, revokes,
// overruns: tenant_statistics.h. oom_denials: reservations its ledger
// refused at the cap; null where memory_cap is.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpulimit/server/loop/hello_validation.h"
#include "gpulimit/server/metrics/tenant_statistics.h"
#include "gpulimit/server/scheduling/scheduling_types.h"

namespace gpulimit::server {

struct ServerStatus {
  pid_t pid = 0;
  std::string mode;  // "user" or "system"
  std::string socket;
  int64_t quantum_us = 0;
  double uptime_s = 0;
  int protocol = 0;
  std::optional<std::string> metrics;  // "host:port" of the Prometheus endpoint
};

struct BoardDeviceStatus {
  uint32_t board_index = 0;
  DeviceUuid uuid{};
  std::optional<std::string> holder;  // tenant id
  uint32_t waiting = 0;
};

struct TenantDeviceStatus {
  DeviceUuid uuid{};
  std::optional<uint64_t> memory_used;
  std::optional<uint64_t> memory_cap;
  double share_target = 0;
  double share_achieved = 0;
  int64_t held_ns = 0;
  int64_t wait_ns = 0;
  uint64_t grants = 0;
  uint64_t revokes = 0;
  uint64_t overruns = 0;
  std::optional<uint64_t> oom_denials;
  WaitHistogram waits;  // for the metrics only, not in the JSON
};

struct TenantStatus {
  std::string tenant;
  uint32_t number = 0;
  uid_t uid = 0;
  std::string user;
  std::vector<pid_t> pids;
  std::string command;
  ComputeShare share;
  std::vector<TenantDeviceStatus> devices;
};

// A GPU process that runs without gpulimit (watcher_unmanaged.h): in the
// JSON as "unmanaged":[{"pid":N,"uid":N,"user":"name","command":"comm",
// "device":"/dev/nvidia0"|"GPU-..."}], before "tenants".
struct UnmanagedStatus {
  pid_t pid = 0;
  uid_t uid = 0;
  std::string user;
  std::string command;
  std::string device;  // the node it opened, or the GPU the driver lists it on
};

struct StatusSnapshot {
  ServerStatus server;
  std::vector<BoardDeviceStatus> devices;
  std::vector<UnmanagedStatus> unmanaged;
  std::vector<TenantStatus> tenants;
};

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi writes UUIDs.
std::string format_gpu_uuid(const DeviceUuid& uuid);
const char* priority_name(protocol::Priority priority);

// The JSON text, at most `max_bytes` long: tenants are left out from the end
// until it fits (`left_out` says how many).
std::string render_status(const StatusSnapshot& status, std::size_t max_bytes,
                          std::size_t& left_out);

}  // namespace gpulimit::server
