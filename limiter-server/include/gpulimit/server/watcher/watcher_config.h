// How gpulimitd watches the machine beyond its own tenants: the kernel-side
// watcher (watcher.h), what it does with GPU processes that bypass gpulimit
// (watcher_unmanaged.h), and the cross-check of its ledgers against the
// driver's own account (driver_cross_check.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "gpulimit/server/policy/policy.h"  // UnmanagedAction: allow, warn (logged once), kill (SIGKILL)
#include "gpulimit/server/scheduling/scheduling_types.h"

namespace gpulimit::server {

// --watch: whether the BPF watcher is loaded.
enum class WatchMode {
  kAuto,  // when it can be (root, BTF, tracefs, built in); otherwise say once why not
  kOn,    // or the server does not start
  kOff,   // never
};

// --unmanaged gives every process one action; the policy file's answer per
// user and group comes through this lookup. Empty: unmanaged_default for all.
using UnmanagedPolicy = std::function<UnmanagedAction(uid_t uid, gid_t gid)>;

inline constexpr TimeNs kDefaultCrossCheckIntervalNs = 2'000 * kNsPerMs;
// Ledger and driver may disagree by this much before it is called drift:
// the driver counts what the ledger cannot see (module images, heaps, its
// own rounding to pages).
inline constexpr uint64_t kDefaultDriftThresholdBytes = uint64_t{64} << 20;
// A process that opened a GPU node with libgpulimit.so mapped has this long
// to join its tenant before it counts as unmanaged: the library connects
// after the driver's cuInit, which opens the nodes first.
inline constexpr TimeNs kJoinGraceNs = 5'000 * kNsPerMs;

struct WatcherConfig {
  WatchMode mode = WatchMode::kAuto;
  UnmanagedAction unmanaged_default = UnmanagedAction::kWarn;
  UnmanagedPolicy unmanaged_policy;  // empty: unmanaged_default for everyone
  // How often NVML's per-process memory is compared with the ledgers; 0: never.
  TimeNs cross_check_interval_ns = kDefaultCrossCheckIntervalNs;
  uint64_t drift_threshold_bytes = kDefaultDriftThresholdBytes;
  // Tenant exits are also taken from each process's pidfd. Off only to
  // test that the watcher's exit events alone reclaim a dead tenant.
  bool pidfd_exits = true;
};

const char* watch_mode_name(WatchMode mode);
std::optional<WatchMode> parse_watch_mode(std::string_view text);
std::optional<UnmanagedAction> parse_unmanaged_action(std::string_view text);

}  // namespace gpulimit::server
