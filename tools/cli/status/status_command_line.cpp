#include "status/status_command_line.h"

namespace gpulimit::cli {

bool parse_status_arguments(const std::vector<std::string_view>& args, StatusOptions& out,
                            std::string& error) {
  for (const std::string_view arg : args) {
    if (arg == "--json") {
      out.json = true;
    } else if (arg == "-h" || arg == "--help") {
      out.help = true;
    } else {
      error = "status: unknown argument " + std::string(arg) + " (" + kStatusUsage + ")";
      return false;
    }
  }
  return true;
}

}  // namespace gpulimit::cli
