#include "gpulimit/server/metrics/status_report.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace gpulimit::server {
namespace {

// Keys in the order of the schema, for people reading it raw.
using json = nlohmann::ordered_json;

json optional_number(const std::optional<uint64_t>& value) {
  return value ? json(*value) : json(nullptr);
}

json tenant_json(const TenantStatus& tenant) {
  json devices = json::array();
  for (const TenantDeviceStatus& device : tenant.devices)
    devices.push_back({{"uuid", format_gpu_uuid(device.uuid)},
                       {"memory_used", optional_number(device.memory_used)},
                       {"memory_cap", optional_number(device.memory_cap)},
                       {"share_target", device.share_target},
                       {"share_achieved", device.share_achieved},
                       {"held_ns", device.held_ns},
                       {"wait_ns", device.wait_ns},
                       {"grants", device.grants},
                       {"revokes", device.revokes},
                       {"overruns", device.overruns},
                       {"oom_denials", optional_number(device.oom_denials)}});
  return {
      {"tenant", tenant.tenant},
      {"number", tenant.number},
      {"uid", tenant.uid},
      {"user", tenant.user},
      {"pids", tenant.pids},
      {"command", tenant.command},
      {"sm_percent", tenant.share.sm_percent == 0 ? json(nullptr) : json(tenant.share.sm_percent)},
      {"weight", tenant.share.weight},
      {"priority", priority_name(tenant.share.priority)},
      {"devices", std::move(devices)}};
}

}  // namespace

std::string format_gpu_uuid(const DeviceUuid& u) {
  char text[64];
  std::snprintf(text, sizeof text,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                u[14], u[15]);
  return text;
}

const char* priority_name(protocol::Priority priority) {
  switch (priority) {
    case protocol::Priority::kLow:
      return "low";
    case protocol::Priority::kNormal:
      return "normal";
    case protocol::Priority::kHigh:
      return "high";
  }
  return "normal";
}

std::string render_status(const StatusSnapshot& status, std::size_t max_bytes,
                          std::size_t& left_out) {
  json devices = json::array();
  for (const BoardDeviceStatus& device : status.devices)
    devices.push_back({{"board_index", device.board_index},
                       {"uuid", format_gpu_uuid(device.uuid)},
                       {"holder", device.holder ? json(*device.holder) : json(nullptr)},
                       {"waiting", device.waiting}});
  json unmanaged = json::array();
  for (const UnmanagedStatus& process : status.unmanaged)
    unmanaged.push_back({{"pid", process.pid},
                         {"uid", process.uid},
                         {"user", process.user},
                         {"command", process.command},
                         {"device", process.device}});
  json document = {
      {"server",
       {{"pid", status.server.pid},
        {"mode", status.server.mode},
        {"socket", status.server.socket},
        {"quantum_us", status.server.quantum_us},
        {"uptime_s", status.server.uptime_s},
        {"protocol", status.server.protocol},
        {"metrics", status.server.metrics ? json(*status.server.metrics) : json(nullptr)}}},
      {"devices", std::move(devices)},
      {"unmanaged", std::move(unmanaged)},
      {"tenants", json::array()}};
  // Ids and names are checked, but a command line is whatever bytes the
  // process ran with (and may be cut inside a character): invalid UTF-8
  // becomes a replacement character, never an exception.
  const auto dump = [](const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
  };
  std::string text = dump(document);
  std::size_t kept = 0;
  for (const TenantStatus& tenant : status.tenants) {
    std::string entry = dump(tenant_json(tenant));
    // The document ends with the tenants' "[]}" (added last): each entry goes
    // before its "]}", after a comma from the one before.
    if (text.size() + entry.size() + 1 > max_bytes) break;
    text.insert(text.size() - 2, (kept ? "," : "") + entry);
    ++kept;
  }
  left_out = status.tenants.size() - kept;
  return text;
}

}  // namespace gpulimit::server
