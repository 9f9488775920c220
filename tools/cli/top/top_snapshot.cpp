#include "top/top_snapshot.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace gpulimit::cli {
namespace {

using nlohmann::json;

// A field that may be absent or null; anything else must be a number.
std::optional<uint64_t> optional_count(const json& object, const char* name) {
  const auto field = object.find(name);
  if (field == object.end() || field->is_null()) return std::nullopt;
  return field->get<uint64_t>();
}

std::optional<uint64_t> nullable_count(const json& object, const char* name) {
  const json& field = object.at(name);
  if (field.is_null()) return std::nullopt;
  return field.get<uint64_t>();
}

const json& list(const json& object, const char* name) {
  const json& field = object.at(name);
  if (!field.is_array()) throw std::invalid_argument(std::string(name) + " must be a list");
  return field;
}

TopTenantDevice tenant_device(const json& device) {
  TopTenantDevice out;
  out.uuid = device.at("uuid").get<std::string>();
  out.memory_used = nullable_count(device, "memory_used");
  out.memory_cap = nullable_count(device, "memory_cap");
  out.share_target = device.at("share_target").get<double>();
  out.share_achieved = device.at("share_achieved").get<double>();
  out.wait_ns = optional_count(device, "wait_ns");
  out.grants = optional_count(device, "grants");
  out.revokes = optional_count(device, "revokes");
  out.overruns = optional_count(device, "overruns");
  out.oom_denials = optional_count(device, "oom_denials");
  return out;
}

TopTenant tenant(const json& entry) {
  TopTenant out;
  out.tenant = entry.at("tenant").get<std::string>();
  out.user = entry.at("user").get<std::string>();
  if (const auto command = entry.find("command"); command != entry.end() && !command->is_null()) {
    out.command = command->get<std::string>();
  }
  for (const json& pid : list(entry, "pids"))
    out.pids.push_back(pid.get<int64_t>());
  for (const json& device : list(entry, "devices"))
    out.devices.push_back(tenant_device(device));
  return out;
}

}  // namespace

bool parse_top_snapshot(std::string_view json_text, TopSnapshot& out, std::string& error) {
  try {
    const json status = json::parse(json_text);
    TopSnapshot snapshot;
    const json& server = status.at("server");
    snapshot.server.pid = server.at("pid").get<int64_t>();
    snapshot.server.mode = server.at("mode").get<std::string>();
    snapshot.server.socket = server.at("socket").get<std::string>();
    snapshot.server.quantum_us = server.at("quantum_us").get<uint64_t>();
    snapshot.server.uptime_s = server.at("uptime_s").get<double>();
    for (const json& device : list(status, "devices")) {
      const json& holder = device.at("holder");
      snapshot.devices.push_back(
          {.board_index = device.at("board_index").get<uint64_t>(),
           .uuid = device.at("uuid").get<std::string>(),
           .holder = holder.is_null() ? std::nullopt
                                      : std::optional<std::string>(holder.get<std::string>()),
           .waiting = device.at("waiting").get<uint64_t>()});
    }
    for (const json& entry : list(status, "tenants"))
      snapshot.tenants.push_back(tenant(entry));
    out = std::move(snapshot);
    return true;
  } catch (const json::exception& failure) {
    error = std::string("malformed status from gpulimitd: ") + failure.what();
    return false;
  } catch (const std::invalid_argument& failure) {
    error = std::string("malformed status from gpulimitd: ") + failure.what();
    return false;
  }
}

}  // namespace gpulimit::cli
