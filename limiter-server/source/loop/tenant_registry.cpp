#include "gpulimit/server/loop/tenant_registry.h"

#include <algorithm>

namespace gpulimit::server {

bool ProcessRecord::sees(DeviceIndex device) const {
  return std::binary_search(devices.begin(), devices.end(), device);
}

std::optional<JoinOutcome> TenantRegistry::join(const JoiningProcess& joining) {
  JoinOutcome outcome;
  const auto key = std::make_pair(joining.uid, joining.tenant_id);
  auto found = by_key_.find(key);
  if (found == by_key_.end()) {
    if (next_number_ > shm::kMaxTenantNumber) return std::nullopt;
    TenantRecord record;
    record.number = next_number_++;
    record.uid = joining.uid;
    record.gid = joining.gid;
    record.id = joining.tenant_id;
    record.user = joining.user;
    record.group = joining.group;
    record.command = joining.command;
    record.share = joining.share;
    record.branch = joining.branch;
    found = by_key_.emplace(key, record.number).first;
    tenants_.emplace(record.number, std::move(record));
    outcome.new_tenant = true;
  }
  TenantRecord& tenant = tenants_.at(found->second);
  outcome.tenant = tenant.number;
  outcome.share_differs = !(tenant.share == joining.share);
  tenant.processes.insert(joining.connection);

  ProcessRecord process;
  process.connection = joining.connection;
  process.pid = joining.pid;
  process.tenant = tenant.number;
  process.devices = joining.devices;
  std::sort(process.devices.begin(), process.devices.end());
  process.devices.erase(std::unique(process.devices.begin(), process.devices.end()),
                        process.devices.end());
  process.ledger_path = joining.ledger_path;
  processes_[joining.connection] = std::move(process);
  return outcome;
}

std::optional<LeaveOutcome> TenantRegistry::leave(ConnectionId connection) {
  const auto found = processes_.find(connection);
  if (found == processes_.end()) return std::nullopt;
  LeaveOutcome outcome;
  outcome.process = std::move(found->second);
  outcome.tenant = outcome.process.tenant;
  processes_.erase(found);

  TenantRecord& tenant = tenants_.at(outcome.tenant);
  outcome.tenant_id = tenant.id;
  tenant.processes.erase(connection);
  for (const DeviceIndex device : outcome.process.devices) {
    bool still_seen = false;
    bool still_wanted = false;
    for (const ConnectionId other : tenant.processes) {
      const ProcessRecord& record = processes_.at(other);
      if (!record.sees(device)) continue;
      still_seen = true;
      still_wanted = still_wanted || record.wants.test(device);
    }
    if (!still_seen)
      outcome.devices_left.push_back(device);
    else if (outcome.process.wants.test(device) && !still_wanted)
      outcome.wants_dropped.push_back(device);
  }
  if (tenant.processes.empty()) {
    outcome.tenant_gone = true;
    by_key_.erase(std::make_pair(tenant.uid, tenant.id));
    tenants_.erase(outcome.tenant);
  }
  return outcome;
}

std::optional<TenantNumber> TenantRegistry::find(uid_t uid, const std::string& id) const {
  const auto found = by_key_.find(std::make_pair(uid, id));
  if (found == by_key_.end()) return std::nullopt;
  return found->second;
}

ProcessRecord* TenantRegistry::process(ConnectionId connection) {
  const auto found = processes_.find(connection);
  return found == processes_.end() ? nullptr : &found->second;
}

const ProcessRecord* TenantRegistry::process(ConnectionId connection) const {
  const auto found = processes_.find(connection);
  return found == processes_.end() ? nullptr : &found->second;
}

void TenantRegistry::set_share(TenantNumber tenant, const ComputeShare& share) {
  if (const auto found = tenants_.find(tenant); found != tenants_.end())
    found->second.share = share;
}

void TenantRegistry::set_branch(TenantNumber tenant, const ShareBranch& branch) {
  if (const auto found = tenants_.find(tenant); found != tenants_.end())
    found->second.branch = branch;
}

const TenantRecord* TenantRegistry::tenant(TenantNumber tenant) const {
  const auto found = tenants_.find(tenant);
  return found == tenants_.end() ? nullptr : &found->second;
}

std::vector<ConnectionId> TenantRegistry::processes_seeing(TenantNumber tenant,
                                                           DeviceIndex device) const {
  std::vector<ConnectionId> seeing;
  const TenantRecord* record = this->tenant(tenant);
  if (!record) return seeing;
  for (const ConnectionId connection : record->processes)
    if (processes_.at(connection).sees(device)) seeing.push_back(connection);
  return seeing;
}

bool TenantRegistry::device_in_use(DeviceIndex device) const {
  for (const auto& [connection, process] : processes_)
    if (process.sees(device)) return true;
  return false;
}

std::vector<DeviceIndex> TenantRegistry::devices_of(TenantNumber tenant) const {
  std::set<DeviceIndex> devices;
  if (const TenantRecord* record = this->tenant(tenant))
    for (const ConnectionId connection : record->processes)
      for (const DeviceIndex device : processes_.at(connection).devices)
        devices.insert(device);
  return {devices.begin(), devices.end()};
}

void TenantRegistry::clear_wants(TenantNumber tenant, DeviceIndex device) {
  if (const TenantRecord* record = this->tenant(tenant))
    for (const ConnectionId connection : record->processes)
      processes_.at(connection).wants.reset(device);
}

bool TenantRegistry::wants(TenantNumber tenant, DeviceIndex device) const {
  const TenantRecord* record = this->tenant(tenant);
  if (!record) return false;
  return std::any_of(
      record->processes.begin(), record->processes.end(),
      [&](ConnectionId connection) { return processes_.at(connection).wants.test(device); });
}

}  // namespace gpulimit::server
