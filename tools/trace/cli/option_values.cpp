#include "option_values.h"

#include <charconv>
#include <map>
#include <system_error>

namespace gpulimit::trace::cli {
namespace {

// Digits only: std::from_chars alone would accept a leading '-'.
template <typename T>
bool parse_decimal(std::string_view text, T min, T& out) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return false;
  T value{};
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || stop != end || value < min) return false;
  out = value;
  return true;
}

bool parse_tenant(std::string_view argument, std::string& name, std::set<pid_t>& pids,
                  std::string& error) {
  const auto fail = [&](const std::string& reason) {
    error = "--tenant '" + std::string(argument) + "': " + reason;
    return false;
  };
  const std::size_t equals = argument.find('=');
  if (equals == std::string_view::npos) return fail("expected NAME=PID,PID...");
  if (equals == 0) return fail("the tenant name is empty");
  name = std::string(argument.substr(0, equals));

  std::string_view list = argument.substr(equals + 1);
  for (;;) {
    const std::size_t comma = list.find(',');
    const std::string_view text = list.substr(0, comma);
    pid_t pid = 0;
    if (text.empty()) return fail("empty pid in the list");
    if (!parse_decimal<pid_t>(text, 1, pid)) {
      return fail("'" + std::string(text) + "' is not a pid (a decimal number > 0)");
    }
    pids.insert(pid);
    if (comma == std::string_view::npos) return true;
    list.remove_prefix(comma + 1);
  }
}

}  // namespace

bool parse_non_negative(std::string_view option, std::string_view text, std::int64_t max,
                        std::int64_t& out, std::string& error) {
  std::int64_t value = 0;
  if (parse_decimal<std::int64_t>(text, 0, value) && value <= max) {
    out = value;
    return true;
  }
  error = std::string(option) + " '" + std::string(text) + "' is not a decimal number in [0, " +
          std::to_string(max) + "]";
  return false;
}

bool parse_tenants(const std::vector<std::string>& arguments, TenantMap& out, std::string& error) {
  std::map<pid_t, std::string> tenant_of;
  for (const std::string& argument : arguments) {
    std::string name;
    std::set<pid_t> pids;
    if (!parse_tenant(argument, name, pids, error)) return false;
    if (out.contains(name)) {
      error = "--tenant: tenant '" + name + "' is given twice";
      return false;
    }
    for (const pid_t pid : pids) {
      const auto [previous, inserted] = tenant_of.emplace(pid, name);
      if (!inserted) {
        error = "--tenant: pid " + std::to_string(pid) + " is in both '" + previous->second +
                "' and '" + name + "'";
        return false;
      }
    }
    out.emplace(std::move(name), std::move(pids));
  }
  return true;
}

}  // namespace gpulimit::trace::cli
