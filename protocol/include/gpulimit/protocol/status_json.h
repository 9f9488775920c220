// The status schema (status.h) as JSON, both ways: gpulimitd writes its
// StatusReply through to_json, `gpulimit status` and `gpulimit top` read it
// through parse_status_report. One mapping, so the writer and the readers
// cannot drift apart.
//
// Target gpulimit::status_schema, apart from gpulimit::protocol: it needs
// nlohmann-json and throws, and libgpulimit.so links neither.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "gpulimit/protocol/status.h"

namespace gpulimit::protocol::status {

// Keys in the order of the schema, for people reading it raw.
using Json = nlohmann::ordered_json;

// What from_json throws for JSON that is not of the schema: the field, as a
// path from the top ("tenants[0].devices[1].held_ns"), and what is wrong
// with it ("missing", "type must be number, but is string").
class MalformedStatus : public std::runtime_error {
 public:
  MalformedStatus(std::string path, std::string reason);

  const std::string& path() const { return path_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string path_;
  std::string reason_;
};

void to_json(Json& out, const Server& server);
void to_json(Json& out, const BoardDevice& device);
void to_json(Json& out, const UnmanagedProcess& process);
void to_json(Json& out, const TenantDevice& device);
void to_json(Json& out, const Tenant& tenant);
void to_json(Json& out, const MemoryTotal& total);
void to_json(Json& out, const Report& report);

// Each throws MalformedStatus (newer fields absent: none, see status.h).
void from_json(const Json& in, Server& server);
void from_json(const Json& in, BoardDevice& device);
void from_json(const Json& in, UnmanagedProcess& process);
void from_json(const Json& in, TenantDevice& device);
void from_json(const Json& in, Tenant& tenant);
void from_json(const Json& in, MemoryTotal& total);
void from_json(const Json& in, Report& report);

// A StatusReply's body into `out`. False when `text` is not JSON of the
// schema, with `error` set to one line ("malformed status from gpulimitd:
// tenants[0].pids: must be a list, but is string") and `out` untouched,
// rather than throw.
bool parse_status_report(std::string_view text, Report& out, std::string& error);

}  // namespace gpulimit::protocol::status
