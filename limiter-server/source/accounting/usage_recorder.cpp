#include "gpulimit/server/accounting/usage_recorder.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace gpulimit::server {

namespace {

usage::DeviceUsage& device_of(usage::TenantUsage& record, const std::string& uuid) {
  for (usage::DeviceUsage& device : record.devices)
    if (device.uuid == uuid) return device;
  record.devices.push_back({});
  record.devices.back().uuid = uuid;
  return record.devices.back();
}

}  // namespace

int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

UsageRecorder::UsageRecorder(std::unique_ptr<usage::UsageDatabase> database, int64_t run,
                             GroupsOf groups_of)
    : database_(std::move(database)), run_(run), groups_of_(std::move(groups_of)) {}

void UsageRecorder::observe(const protocol::status::Report& report, TimeNs now, int64_t wall_ns) {
  for (const protocol::status::Tenant& seen : report.tenants) {
    auto [it, created] = running_.try_emplace(seen.number);
    Tenant& tenant = it->second;
    usage::TenantUsage& record = tenant.record;
    if (created) {
      record.run = run_;
      record.number = seen.number;
      record.tenant = seen.tenant;
      record.uid = seen.uid;
      record.user = seen.user;
      record.groups = groups_of_ ? groups_of_(seen.uid) : std::vector<std::string>{};
      record.command = seen.command.value_or("");
      record.started_ns = wall_ns;
      tenant.sampled = now;
    }
    const double seconds = static_cast<double>(now - tenant.sampled) / 1e9;
    for (const protocol::status::TenantDevice& figures : seen.devices) {
      usage::DeviceUsage& device = device_of(record, figures.uuid);
      uint64_t& last = tenant.memory[figures.uuid];
      // What it held since the last sample is taken as what it held then.
      device.byte_seconds += static_cast<double>(last) * seconds;
      last = figures.memory_used.value_or(0);
      device.peak_bytes = std::max(device.peak_bytes, last);
      // GPU time as the scheduler charged it: the token held, and a forced
      // holder's late drain after each ack timeout.
      device.held_ns =
          std::max<uint64_t>(device.held_ns, figures.held_ns + figures.overrun_ns.value_or(0));
      device.oom_denials = std::max(device.oom_denials, figures.oom_denials.value_or(0));
    }
    tenant.sampled = now;
    record.updated_ns = wall_ns;
    tenant.dirty = true;
  }
}

void UsageRecorder::ended(uint32_t number, const char* how, int64_t wall_ns) {
  auto it = running_.find(number);
  if (it == running_.end()) return;
  usage::TenantUsage record = std::move(it->second.record);
  running_.erase(it);
  record.ended_ns = wall_ns;
  record.updated_ns = wall_ns;
  record.ended = how;
  const Totals totals = totals_of(record);
  Totals& user = ended_totals_[record.user];
  user.gpu_seconds += totals.gpu_seconds;
  user.gib_hours += totals.gib_hours;
  ended_unsaved_.push_back(std::move(record));
}

void UsageRecorder::end_all(const char* how, int64_t wall_ns) {
  while (!running_.empty())
    ended(running_.begin()->first, how, wall_ns);
}

bool UsageRecorder::save(std::string& error) {
  std::vector<usage::TenantUsage> changed = ended_unsaved_;
  for (const auto& [number, tenant] : running_)
    if (tenant.dirty) changed.push_back(tenant.record);
  if (changed.empty()) return true;
  if (!database_->save(changed, error)) return false;
  ended_unsaved_.clear();
  for (auto& [number, tenant] : running_)
    tenant.dirty = false;
  return true;
}

UsageRecorder::Totals UsageRecorder::totals_of(const usage::TenantUsage& record) {
  Totals totals;
  for (const usage::DeviceUsage& device : record.devices) {
    totals.gpu_seconds += usage::gpu_seconds(device);
    totals.gib_hours += usage::gib_hours(device);
  }
  return totals;
}

std::map<std::string, UsageRecorder::Totals> UsageRecorder::user_totals() const {
  std::map<std::string, Totals> totals = ended_totals_;
  for (const auto& [number, tenant] : running_) {
    const Totals live = totals_of(tenant.record);
    Totals& user = totals[tenant.record.user];
    user.gpu_seconds += live.gpu_seconds;
    user.gib_hours += live.gib_hours;
  }
  return totals;
}

}  // namespace gpulimit::server
