#include "gpulimit/server/watcher/proc_fields.h"

#include <cstdlib>
#include <string>

namespace gpulimit::server {

std::optional<unsigned> status_real_id(std::string_view status, std::string_view key) {
  // At a line's start (after a newline: the Name line comes first), never
  // inside another line.
  const std::string line_key = "\n" + std::string(key);
  const std::size_t at = status.find(line_key);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view ids = status.substr(at + line_key.size());
  ids = ids.substr(0, ids.find('\n'));
  return static_cast<unsigned>(std::strtoul(std::string(ids).c_str(), nullptr, 10));
}

}  // namespace gpulimit::server
