#include "run/visible_devices.h"

#include <cctype>
#include <cstddef>
#include <set>

namespace gpulimit::cli {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

bool starts_with_ignoring_case(std::string_view text, std::string_view prefix) {
  if (prefix.size() > text.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(text[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

// An index entry: digits only, below `count`.
std::optional<std::size_t> index_entry(std::string_view entry, std::size_t count) {
  if (entry.empty()) return std::nullopt;
  std::size_t index = 0;
  for (const char c : entry) {
    if (c < '0' || c > '9') return std::nullopt;
    index = index * 10 + static_cast<std::size_t>(c - '0');
    if (index >= count) return std::nullopt;
  }
  return index;
}

// The one GPU whose UUID starts with `entry`.
std::optional<std::size_t> uuid_entry(std::string_view entry,
                                      const std::vector<std::string>& gpu_uuids) {
  std::optional<std::size_t> found;
  for (std::size_t i = 0; i < gpu_uuids.size(); ++i) {
    if (!starts_with_ignoring_case(gpu_uuids[i], entry)) continue;
    if (found) return std::nullopt;
    found = i;
  }
  return found;
}

}  // namespace

unsigned count_visible_devices(const std::vector<std::string>& gpu_uuids,
                               std::optional<std::string_view> mask) {
  if (!mask) return static_cast<unsigned>(gpu_uuids.size());
  unsigned count = 0;
  std::set<std::size_t> seen;
  std::string_view rest = *mask;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view entry = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);

    // A MIG instance is a device of its own, which NVML's GPU list does not
    // name: counted, not checked.
    if (starts_with_ignoring_case(entry, "MIG-")) {
      ++count;
      continue;
    }
    const std::optional<std::size_t> gpu = starts_with_ignoring_case(entry, "GPU-")
                                               ? uuid_entry(entry, gpu_uuids)
                                               : index_entry(entry, gpu_uuids.size());
    if (!gpu || !seen.insert(*gpu).second) break;
    ++count;
  }
  return count;
}

}  // namespace gpulimit::cli
