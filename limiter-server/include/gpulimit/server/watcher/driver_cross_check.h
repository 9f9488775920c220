// The driver's account against the ledgers': every few seconds gpulimitd
// reads from NVML how much memory each process holds on each GPU and
// compares it with what its tenants' ledgers say (ledger_inspection.h).
// This file is the comparison alone, on plain figures, so that it can be
// tested without a driver; driver_nvml.h reads NVML.
//
// NVML reports host pids (the initial pid namespace). Tenants are known by
// the pids SO_PEERCRED gives the server, which are host pids only when the
// server itself runs in the initial pid namespace; elsewhere the server
// does not cross-check per process at all (see limiter-server/README.md).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gpulimit::server {

// What NVML says of one GPU.
struct DriverProcessMemory {
  pid_t pid = 0;
  uint64_t bytes = 0;
};
struct DriverDeviceSample {
  std::string uuid;  // "GPU-...", as NVML writes it
  std::vector<DriverProcessMemory> processes;
};

// What the server knows of one tenant: its processes and its ledger.
struct TenantLedgerDevice {
  std::string uuid;  // "GPU-..."
  uint64_t used = 0;
  uint64_t cap = 0;  // 0: no cap on this device
};
struct TenantLedgerView {
  std::string tenant;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<pid_t> pids;
  std::vector<TenantLedgerDevice> devices;
};

struct CrossCheckFindings {
  // The driver and the ledger disagree by more than the threshold.
  struct Drift {
    std::string tenant;
    std::string uuid;
    uint64_t driver_bytes = 0;
    uint64_t ledger_bytes = 0;
  };
  // By the driver's account the tenant holds more than its cap.
  struct OverCap {
    std::string tenant;
    uid_t uid = 0;
    gid_t gid = 0;
    std::string uuid;
    uint64_t driver_bytes = 0;
    uint64_t cap = 0;
    std::vector<pid_t> pids;  // the tenant's processes holding memory there
  };
  // A process holding GPU memory that is no tenant's.
  struct Stranger {
    pid_t pid = 0;
    std::string uuid;
    uint64_t bytes = 0;
  };
  std::vector<Drift> drifts;
  std::vector<OverCap> over_cap;
  std::vector<Stranger> strangers;
};

// Compares one sample with the tenants. `drift_threshold`: the difference
// tolerated between driver and ledger (either way) on a device.
CrossCheckFindings cross_check(const std::vector<DriverDeviceSample>& driver,
                               const std::vector<TenantLedgerView>& tenants,
                               uint64_t drift_threshold);

}  // namespace gpulimit::server
