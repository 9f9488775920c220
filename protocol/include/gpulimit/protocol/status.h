// The status schema: the body of a StatusReply, what gpulimitd says of
// itself, its devices and its tenants. gpulimitd fills these structs;
// `gpulimit status` and `gpulimit top` render them. On the wire it is JSON
// (status_json.h, target gpulimit::status_schema), a member per field below
// under the same name, in this order, for example:
//
// {"server":{"pid":4242,"mode":"user","socket":"/run/user/1000/gpulimit/gpulimitd.sock",
//            "quantum_us":20000,"uptime_s":12.5,"protocol":4,"metrics":null},
//  "devices":[{"board_index":0,"uuid":"GPU-11223344-5566-7788-99aa-bbccddeeff00",
//              "holder":"train-42","waiting":1}],
//  "unmanaged":[{"pid":31337,"uid":1002,"user":"carol","command":"python3",
//                "device":"/dev/nvidia0"}],
//  "memory_totals":[{"scope":"group","id":2000,"name":"ml","board_index":0,
//                    "uuid":"GPU-11223344-5566-7788-99aa-bbccddeeff00",
//                    "total":42949672960,"used":3221225472,"promised":4294967296,
//                    "tenants":1}],
//  "tenants":[{"tenant":"train-42","number":1,"uid":1000,"user":"alice","pids":[5001,5002],
//              "command":"python train.py --epochs 10",
//              "sm_percent":null,"weight":3,"priority":"normal",
//              "devices":[{"uuid":"GPU-11223344-5566-7788-99aa-bbccddeeff00",
//                          "memory_used":3221225472,"memory_cap":8589934592,
//                          "share_target":0.75,"share_achieved":0.74,"held_ns":9120000000,
//                          "wait_ns":2310000000,"grants":412,"revokes":411,"overruns":0,
//                          "oom_denials":3,"overrun_ns":0}],
//              "leader":5001,"orphaned_s":null,"orphan_kill_in_s":null,
//              "gid":2000,"group":"ml","group_share":3,"user_share":1}]}
//
// An optional field is null in the JSON when it has no value. Fields marked
// "newer" came after the first gpulimitd: it sends them all now, but a
// reader takes them as unknown when absent, so that it still shows an older
// server. Every other field must be there, of its type.
//
// Plain structs only: this header is part of gpulimit::protocol, which the
// preloaded library links, so it needs neither the JSON library nor
// exceptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpulimit/protocol/messages.h"
#include "gpulimit/protocol/priority.h"

namespace gpulimit::protocol::status {

struct Server {
  int64_t pid = 0;
  std::string mode;         // "user" (a per-user server) or "system"
  std::string socket;       // the path it listens on
  uint64_t quantum_us = 0;  // the scheduler's time slice, microseconds
  double uptime_s = 0;      // seconds since it started
  uint32_t protocol = 0;    // its protocol::kVersion
  // Newer. "host:port" of the Prometheus endpoint; none when it serves no
  // metrics.
  std::optional<std::string> metrics;

  friend bool operator==(const Server&, const Server&) = default;
};

// A device on gpulimitd's board, with its token.
struct BoardDevice {
  uint32_t board_index = 0;  // the device's index on the board (not NVML's)
  std::string uuid;          // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi writes it
  std::optional<std::string> holder;  // the id of the tenant holding the token; none: free
  uint32_t waiting = 0;               // tenants other than the holder that wait for it

  friend bool operator==(const BoardDevice&, const BoardDevice&) = default;
};

// A process using a GPU without gpulimit, as the server's watcher saw it
// (watcher_unmanaged.h). Newer: the whole list; none without a watcher.
struct UnmanagedProcess {
  int64_t pid = 0;
  uint32_t uid = 0;
  std::string user;     // uid's login name
  std::string command;  // the process's comm
  std::string device;   // the node it opened ("/dev/nvidia0"), or the GPU the driver lists it on

  friend bool operator==(const UnmanagedProcess&, const UnmanagedProcess&) = default;
};

// A tenant's figures on one device its processes use. The counters start when the
// tenant first wants the device and go with the tenant (its last process's
// exit); they survive its processes leaving the device and coming back.
struct TenantDevice {
  std::string uuid;  // "GPU-...", as in BoardDevice
  // Bytes its processes hold on the device, as its ledger counts them, and
  // its cap there; both none for a device its ledger has no cap for (used:
  // also when the ledger could not be read).
  std::optional<uint64_t> memory_used;
  std::optional<uint64_t> memory_cap;
  // Fractions of the device's time, 0 to 1. Target: the share the scheduling
  // rules give it under the current demand (strict priority, then weights,
  // none above its cap); achieved: time held over wall time in the last
  // 10 s, or since the tenant first wanted the device.
  double share_target = 0;
  double share_achieved = 0;
  uint64_t held_ns = 0;  // the token held in total, the running hold included
  // Newer, each of the five. Time it wanted the token without holding it,
  // the running wait included.
  std::optional<uint64_t> wait_ns;
  std::optional<uint64_t> grants;    // times the token was given to it
  std::optional<uint64_t> revokes;   // times it was asked to give the token back
  std::optional<uint64_t> overruns;  // ack timeouts forced on it: taken back without its drain
  // Allocations its ledger refused at the cap, counted by whichever of its
  // processes was refused; none where memory_cap is none.
  std::optional<uint64_t> oom_denials;
  // Newer still: the time charged to it after its ack timeouts, from each
  // forced release to its late drain (or its next grant), as held time.
  std::optional<uint64_t> overrun_ns;

  friend bool operator==(const TenantDevice&, const TenantDevice&) = default;
};

struct Tenant {
  std::string tenant;   // its id, [A-Za-z0-9._-]{1,64}
  uint32_t number = 0;  // the server's number for it, never reused while it runs
  uint32_t uid = 0;
  std::string user;           // uid's login name
  std::vector<int64_t> pids;  // its processes attached now, ascending
  // Newer. Its first process's command line (/proc/PID/cmdline, arguments
  // joined by spaces, at most 128 bytes, control characters as '?'); "" when
  // it could not be read.
  std::optional<std::string> command;
  std::optional<uint32_t> sm_percent;     // hard cap, percent of GPU time; none: no cap
  uint32_t weight = 1;                    // its share under contention, 1 to kMaxWeight
  Priority priority = Priority::kNormal;  // "low", "normal" or "high" (priority_name)
  std::vector<TenantDevice> devices;      // the devices its processes use, in board order
  // Newer. Its job's main process (protocol/job_leader.h); none when the job
  // names none.
  std::optional<int64_t> leader;
  // Newer. Seconds since the leader exited while the tenant still runs (an
  // orphan); none while the leader runs.
  std::optional<double> orphaned_s;
  // Newer. Seconds until gpulimitd kills the orphan (policy orphans =
  // "kill"); none when it will not.
  std::optional<double> orphan_kill_in_s;
  // Newer. Its place in the fair-share tree: the group its first process
  // ran as (gid and name), that group's share and its user's share within
  // the group, as the policy gives them.
  std::optional<uint32_t> gid;
  std::optional<std::string> group;
  std::optional<uint32_t> group_share;
  std::optional<uint32_t> user_share;

  friend bool operator==(const Tenant&, const Tenant&) = default;
};

// A group's or user's memory_total on one device (policy), against what its
// tenants hold there and what gpulimitd has promised them (their leases).
struct MemoryTotal {
  std::string scope;  // "group" or "user"
  uint32_t id = 0;    // gid or uid
  std::string name;   // its name, or the id as text
  // The device; none for a memory_total_all, of every device together.
  std::optional<uint32_t> board_index;
  std::optional<std::string> uuid;
  uint64_t total = 0;     // bytes
  uint64_t used = 0;      // bytes its tenants' ledgers hold there
  uint64_t promised = 0;  // bytes leased to them
  uint32_t tenants = 0;

  friend bool operator==(const MemoryTotal&, const MemoryTotal&) = default;
};

struct Report {
  Server server;
  std::vector<BoardDevice> devices;  // the board, in index order
  std::vector<UnmanagedProcess> unmanaged;
  // Newer. Every total that binds a running tenant, by scope, id and device.
  std::vector<MemoryTotal> memory_totals;
  // Tenants that do not fit in one message are left out from the end
  // (gpulimitd logs how many).
  std::vector<Tenant> tenants;

  friend bool operator==(const Report&, const Report&) = default;
};

}  // namespace gpulimit::protocol::status
