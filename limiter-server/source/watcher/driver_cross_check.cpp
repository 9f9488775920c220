#include "gpulimit/server/watcher/driver_cross_check.h"

#include <algorithm>
#include <map>

namespace gpulimit::server {

CrossCheckFindings cross_check(const std::vector<DriverDeviceSample>& driver,
                               const std::vector<TenantLedgerView>& tenants,
                               uint64_t drift_threshold) {
  std::map<pid_t, std::size_t> tenant_of;
  for (std::size_t i = 0; i < tenants.size(); ++i)
    for (const pid_t pid : tenants[i].pids)
      tenant_of[pid] = i;

  CrossCheckFindings findings;
  for (const DriverDeviceSample& device : driver) {
    // The driver's bytes per tenant on this device, and which pids hold them.
    std::map<std::size_t, uint64_t> bytes_of;
    std::map<std::size_t, std::vector<pid_t>> pids_of;
    for (const DriverProcessMemory& process : device.processes) {
      const auto found = tenant_of.find(process.pid);
      if (found == tenant_of.end()) {
        findings.strangers.push_back({process.pid, device.uuid, process.bytes});
        continue;
      }
      bytes_of[found->second] += process.bytes;
      pids_of[found->second].push_back(process.pid);
    }
    for (std::size_t i = 0; i < tenants.size(); ++i) {
      const TenantLedgerView& tenant = tenants[i];
      const auto ledger =
          std::find_if(tenant.devices.begin(), tenant.devices.end(),
                       [&](const TenantLedgerDevice& entry) { return entry.uuid == device.uuid; });
      const uint64_t driver_bytes = bytes_of.contains(i) ? bytes_of[i] : 0;
      if (ledger == tenant.devices.end()) {
        // No ledger entry: the tenant never charged this GPU.
        if (driver_bytes > drift_threshold)
          findings.drifts.push_back({tenant.tenant, device.uuid, driver_bytes, 0});
        continue;
      }
      const uint64_t difference =
          driver_bytes > ledger->used ? driver_bytes - ledger->used : ledger->used - driver_bytes;
      if (difference > drift_threshold)
        findings.drifts.push_back({tenant.tenant, device.uuid, driver_bytes, ledger->used});
      if (ledger->cap > 0 && driver_bytes > ledger->cap) {
        std::vector<pid_t> pids = pids_of[i];
        std::sort(pids.begin(), pids.end());
        findings.over_cap.push_back({tenant.tenant, tenant.uid, tenant.gid, device.uuid,
                                     driver_bytes, ledger->cap, std::move(pids)});
      }
    }
  }
  return findings;
}

}  // namespace gpulimit::server
