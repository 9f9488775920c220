#include "run/job_environment.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "gpulimit/options/environment.h"
#include "gpulimit/options/option_table.h"
#include "run/preload_list.h"

namespace gpulimit::cli {
namespace {

constexpr std::string_view kPreloadVariable = "LD_PRELOAD";
constexpr std::string_view kHamiDeviceMemPrefix =
    options::option(options::OptionId::kDeviceMem).hami_alias;

}  // namespace

bool job_environment(char* const* base, const options::Limits& limits,
                     const protocol::JobLeader& leader, const std::string& library,
                     std::vector<std::string>& out, std::string& error) {
  std::vector<std::string> environment;
  std::optional<std::string_view> preload;
  for (char* const* entry = base; entry && *entry; ++entry) {
    const std::string_view assignment(*entry);
    const std::string_view name = options::variable_name(assignment);
    if (name == kPreloadVariable) {
      // The first counts, as with getenv; every one goes.
      if (!preload) preload = assignment.substr(std::min(assignment.size(), name.size() + 1));
      continue;
    }
    // Every limit is in the variables written below; HAMi's per-device
    // caps name devices by index, which the job's processes may number anew.
    if (options::is_option_variable(name) || name.starts_with(kHamiDeviceMemPrefix) ||
        name == protocol::kJobLeaderVariable)
      continue;
    environment.emplace_back(assignment);
  }

  std::vector<std::string> assignments;
  if (!options::limits_to_environment(limits, assignments)) {
    error = "out of memory";
    return false;
  }
  environment.insert(environment.end(), assignments.begin(), assignments.end());
  if (leader.pid != 0) {
    char value[48];
    if (!protocol::format_job_leader(leader, value, sizeof value)) {
      error = "cannot write " + std::string(protocol::kJobLeaderVariable);
      return false;
    }
    environment.push_back(std::string(protocol::kJobLeaderVariable) + "=" + value);
  }
  environment.push_back(std::string(kPreloadVariable) + "=" +
                        preload_with(library, preload.value_or("")));
  out = std::move(environment);
  return true;
}

}  // namespace gpulimit::cli
