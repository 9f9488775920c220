#include "gpulimit/server/metrics/status_report.h"

#include <utility>

#include "gpulimit/protocol/status_json.h"

namespace gpulimit::server {

std::string render_status(const protocol::status::Report& report, std::size_t max_bytes,
                          std::size_t& left_out) {
  using protocol::status::Json;
  Json document = report;
  const Json tenants = std::exchange(document["tenants"], Json::array());
  // Ids and names are checked, but a command line is whatever bytes the
  // process ran with (and may be cut inside a character): invalid UTF-8
  // becomes a replacement character, never an exception.
  const auto dump = [](const Json& value) {
    return value.dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  std::string text = dump(document);
  std::size_t kept = 0;
  for (const Json& tenant : tenants) {
    std::string entry = dump(tenant);
    // The document ends with the tenants' "[]}" (emptied above): each entry
    // goes before its "]}", after a comma from the one before.
    if (text.size() + entry.size() + 1 > max_bytes) break;
    text.insert(text.size() - 2, (kept ? "," : "") + entry);
    ++kept;
  }
  left_out = tenants.size() - kept;
  return text;
}

}  // namespace gpulimit::server
