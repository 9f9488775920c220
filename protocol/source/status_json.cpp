#include "gpulimit/protocol/status_json.h"

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "gpulimit/options/values.h"
#include "gpulimit/protocol/priority.h"

namespace gpulimit::protocol::status {
namespace {

// nlohmann's message without its "[json.exception.type_error.302] ".
std::string reason_of(const Json::exception& failure) {
  std::string_view text = failure.what();
  if (text.starts_with("[json.exception.")) {
    if (const std::size_t end = text.find("] "); end != std::string_view::npos)
      text.remove_prefix(end + 2);
  }
  return std::string(text);
}

// "tenants[0]" before "devices[1].held_ns", "server" before "pid".
std::string joined(const std::string& step, const std::string& path) {
  if (path.empty()) return step;
  return step + (path.front() == '[' ? "" : ".") + path;
}

// Runs `read`, which reads the value at `step`; a failure in it names the
// field by its path from here.
template <typename Read>
void within(const std::string& step, Read read) {
  try {
    read();
  } catch (const MalformedStatus& failure) {
    throw MalformedStatus(joined(step, failure.path()), failure.reason());
  } catch (const Json::exception& failure) {
    throw MalformedStatus(step, reason_of(failure));
  }
}

void expect_object(const Json& in) {
  if (!in.is_object())
    throw MalformedStatus("", std::string("must be an object, but is ") + in.type_name());
}

const Json& member(const Json& object, const char* name) {
  const auto found = object.find(name);
  if (found == object.end()) throw MalformedStatus(name, "missing");
  return *found;
}

// Whether `value` is a whole number that an integer T holds.
template <typename T>
bool whole_number_of(const Json& value) {
  if (value.is_number_unsigned())
    return value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  if (!value.is_number_integer()) return false;
  const int64_t number = value.get<int64_t>();
  if (number < 0) return number >= static_cast<int64_t>(std::numeric_limits<T>::min());
  return static_cast<uint64_t>(number) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
}

// `value` as a T. nlohmann casts any number to any arithmetic type: a
// fraction or a huge number read as an integer would be undefined behaviour
// (a double cast to an integer it does not fit) or quietly another value (a
// wider integer cut down), so an integer field takes whole numbers in its
// range only. What is not a number at all, nlohmann names.
template <typename T>
T value_as(const Json& value) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (value.is_number() && !whole_number_of<T>(value))
      throw MalformedStatus("", "must be a whole number from " +
                                    std::to_string(std::numeric_limits<T>::min()) + " to " +
                                    std::to_string(std::numeric_limits<T>::max()) + ", but is " +
                                    value.dump());
  }
  return value.get<T>();
}

// A field that must be there, not null.
template <typename T>
void read(const Json& object, const char* name, T& out) {
  const Json& value = member(object, name);
  within(name, [&] { out = value_as<T>(value); });
}

// A field that must be there, null for none.
template <typename T>
void read(const Json& object, const char* name, std::optional<T>& out) {
  const Json& value = member(object, name);
  if (value.is_null()) {
    out.reset();
    return;
  }
  within(name, [&] { out = value_as<T>(value); });
}

// A list that must be there; a failure names the entry ("pids[2]").
template <typename T>
void read(const Json& object, const char* name, std::vector<T>& out) {
  const Json& value = member(object, name);
  if (!value.is_array())
    throw MalformedStatus(name, std::string("must be a list, but is ") + value.type_name());
  out.clear();
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i)
    within(std::string(name) + "[" + std::to_string(i) + "]",
           [&] { out.push_back(value_as<T>(value[i])); });
}

// A newer field (status.h): absent is none as null is.
template <typename T>
void read_newer(const Json& object, const char* name, std::optional<T>& out) {
  if (object.contains(name)) {
    read(object, name, out);
  } else {
    out.reset();
  }
}

// A newer list: absent is empty.
template <typename T>
void read_newer(const Json& object, const char* name, std::vector<T>& out) {
  if (object.contains(name)) {
    read(object, name, out);
  } else {
    out.clear();
  }
}

template <typename T>
Json nullable(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

}  // namespace

MalformedStatus::MalformedStatus(std::string path, std::string reason)
    : std::runtime_error(path.empty() ? reason : path + ": " + reason),
      path_(std::move(path)),
      reason_(std::move(reason)) {}

void to_json(Json& out, const Server& server) {
  out = {{"pid", server.pid},
         {"mode", server.mode},
         {"socket", server.socket},
         {"quantum_us", server.quantum_us},
         {"uptime_s", server.uptime_s},
         {"protocol", server.protocol},
         {"metrics", nullable(server.metrics)}};
}

void to_json(Json& out, const BoardDevice& device) {
  out = {{"board_index", device.board_index},
         {"uuid", device.uuid},
         {"holder", nullable(device.holder)},
         {"waiting", device.waiting}};
}

void to_json(Json& out, const UnmanagedProcess& process) {
  out = {{"pid", process.pid},
         {"uid", process.uid},
         {"user", process.user},
         {"command", process.command},
         {"device", process.device}};
}

void to_json(Json& out, const TenantDevice& device) {
  out = {{"uuid", device.uuid},
         {"memory_used", nullable(device.memory_used)},
         {"memory_cap", nullable(device.memory_cap)},
         {"share_target", device.share_target},
         {"share_achieved", device.share_achieved},
         {"held_ns", device.held_ns},
         {"wait_ns", nullable(device.wait_ns)},
         {"grants", nullable(device.grants)},
         {"revokes", nullable(device.revokes)},
         {"overruns", nullable(device.overruns)},
         {"oom_denials", nullable(device.oom_denials)},
         {"overrun_ns", nullable(device.overrun_ns)}};
}

void to_json(Json& out, const Tenant& tenant) {
  out = {{"tenant", tenant.tenant},
         {"number", tenant.number},
         {"uid", tenant.uid},
         {"user", tenant.user},
         {"pids", tenant.pids},
         {"command", nullable(tenant.command)},
         {"sm_percent", nullable(tenant.sm_percent)},
         {"weight", tenant.weight},
         {"priority", priority_name(tenant.priority)},
         {"devices", tenant.devices},
         {"leader", nullable(tenant.leader)},
         {"orphaned_s", nullable(tenant.orphaned_s)},
         {"orphan_kill_in_s", nullable(tenant.orphan_kill_in_s)},
         {"gid", nullable(tenant.gid)},
         {"group", nullable(tenant.group)},
         {"group_share", nullable(tenant.group_share)},
         {"user_share", nullable(tenant.user_share)}};
}

void to_json(Json& out, const MemoryTotal& total) {
  out = {{"scope", total.scope},         {"id", total.id},
         {"name", total.name},           {"board_index", nullable(total.board_index)},
         {"uuid", nullable(total.uuid)}, {"total", total.total},
         {"used", total.used},           {"promised", total.promised},
         {"tenants", total.tenants}};
}

void to_json(Json& out, const Report& report) {
  out = {{"server", report.server},
         {"devices", report.devices},
         {"unmanaged", report.unmanaged},
         {"memory_totals", report.memory_totals},
         {"tenants", report.tenants}};
}

void from_json(const Json& in, Server& server) {
  expect_object(in);
  read(in, "pid", server.pid);
  read(in, "mode", server.mode);
  read(in, "socket", server.socket);
  read(in, "quantum_us", server.quantum_us);
  read(in, "uptime_s", server.uptime_s);
  read(in, "protocol", server.protocol);
  read_newer(in, "metrics", server.metrics);
}

void from_json(const Json& in, BoardDevice& device) {
  expect_object(in);
  read(in, "board_index", device.board_index);
  read(in, "uuid", device.uuid);
  read(in, "holder", device.holder);
  read(in, "waiting", device.waiting);
}

void from_json(const Json& in, UnmanagedProcess& process) {
  expect_object(in);
  read(in, "pid", process.pid);
  read(in, "uid", process.uid);
  read(in, "user", process.user);
  read(in, "command", process.command);
  read(in, "device", process.device);
}

void from_json(const Json& in, TenantDevice& device) {
  expect_object(in);
  read(in, "uuid", device.uuid);
  read(in, "memory_used", device.memory_used);
  read(in, "memory_cap", device.memory_cap);
  read(in, "share_target", device.share_target);
  read(in, "share_achieved", device.share_achieved);
  read(in, "held_ns", device.held_ns);
  read_newer(in, "wait_ns", device.wait_ns);
  read_newer(in, "grants", device.grants);
  read_newer(in, "revokes", device.revokes);
  read_newer(in, "overruns", device.overruns);
  read_newer(in, "overrun_ns", device.overrun_ns);
  read_newer(in, "oom_denials", device.oom_denials);
}

void from_json(const Json& in, Tenant& tenant) {
  expect_object(in);
  read(in, "tenant", tenant.tenant);
  read(in, "number", tenant.number);
  read(in, "uid", tenant.uid);
  read(in, "user", tenant.user);
  read(in, "pids", tenant.pids);
  read_newer(in, "command", tenant.command);
  read(in, "sm_percent", tenant.sm_percent);
  read(in, "weight", tenant.weight);
  std::string priority;
  read(in, "priority", priority);
  options::Priority parsed = options::Priority::kNormal;
  std::string reason;
  if (!options::parse_priority(priority, parsed, reason))
    throw MalformedStatus("priority", "not a priority (low, normal or high)");
  tenant.priority = to_protocol(parsed);
  read(in, "devices", tenant.devices);
  read_newer(in, "leader", tenant.leader);
  read_newer(in, "orphaned_s", tenant.orphaned_s);
  read_newer(in, "orphan_kill_in_s", tenant.orphan_kill_in_s);
  read_newer(in, "gid", tenant.gid);
  read_newer(in, "group", tenant.group);
  read_newer(in, "group_share", tenant.group_share);
  read_newer(in, "user_share", tenant.user_share);
}

void from_json(const Json& in, MemoryTotal& total) {
  expect_object(in);
  read(in, "scope", total.scope);
  if (total.scope != "group" && total.scope != "user")
    throw MalformedStatus("scope", "neither \"group\" nor \"user\"");
  read(in, "id", total.id);
  read(in, "name", total.name);
  read(in, "board_index", total.board_index);
  read(in, "uuid", total.uuid);
  read(in, "total", total.total);
  read(in, "used", total.used);
  read(in, "promised", total.promised);
  read(in, "tenants", total.tenants);
}

void from_json(const Json& in, Report& report) {
  expect_object(in);
  read(in, "server", report.server);
  read(in, "devices", report.devices);
  read_newer(in, "unmanaged", report.unmanaged);
  read_newer(in, "memory_totals", report.memory_totals);
  read(in, "tenants", report.tenants);
}

bool parse_status_report(std::string_view text, Report& out, std::string& error) {
  const std::string prefix = "malformed status from gpulimitd: ";
  try {
    Report report = Json::parse(text).get<Report>();
    out = std::move(report);
    return true;
  } catch (const MalformedStatus& failure) {
    error = prefix + failure.what();
  } catch (const Json::exception& failure) {
    error = prefix + reason_of(failure);
  }
  return false;
}

}  // namespace gpulimit::protocol::status
