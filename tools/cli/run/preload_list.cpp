#include "run/preload_list.h"

#include "common/file_identity.h"

namespace gpulimit::cli {
namespace {

constexpr std::string_view kLibraryName = "libgpulimit.so";

bool is_interposer(const std::string& entry, const std::string& library) {
  const std::size_t slash = entry.rfind('/');
  const std::string_view name = slash == std::string::npos
                                    ? std::string_view(entry)
                                    : std::string_view(entry).substr(slash + 1);
  return entry == library || name == kLibraryName || same_file(entry, library);
}

}  // namespace

std::string preload_with(const std::string& library, std::string_view current) {
  std::string result = library;
  while (!current.empty()) {
    const std::size_t separator = current.find_first_of(" :");
    const std::string entry(current.substr(0, separator));
    current =
        separator == std::string_view::npos ? std::string_view() : current.substr(separator + 1);
    if (entry.empty() || is_interposer(entry, library)) continue;
    result += ':';
    result += entry;
  }
  return result;
}

}  // namespace gpulimit::cli
