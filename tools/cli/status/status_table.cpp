#include "status/status_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/decimal_text.h"
#include "gpulimit/protocol/status_json.h"

namespace gpulimit::cli {
namespace {

namespace status = protocol::status;

// Columns as wide as their widest cell, two spaces apart; the last column
// is not padded, so no line ends in spaces.
class TextTable {
 public:
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  std::string render() const {
    std::vector<std::size_t> widths;
    for (const auto& row : rows_) {
      widths.resize(std::max(widths.size(), row.size()));
      for (std::size_t i = 0; i < row.size(); ++i)
        widths[i] = std::max(widths[i], row[i].size());
    }
    std::string text;
    for (const auto& row : rows_) {
      std::string line;
      for (std::size_t i = 0; i < row.size(); ++i) {
        line += row[i];
        if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
      }
      while (!line.empty() && line.back() == ' ')
        line.pop_back();
      text += line + '\n';
    }
    return text;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string format_percent(double fraction) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f%%", fraction * 100.0);
  return text;
}

std::string format_duration(double seconds) {
  const auto whole = static_cast<uint64_t>(std::max(0.0, seconds));
  char text[64];
  if (whole < 60) {
    std::snprintf(text, sizeof text, "%llus", static_cast<unsigned long long>(whole));
  } else if (whole < 3600) {
    std::snprintf(text, sizeof text, "%llum %02llus", static_cast<unsigned long long>(whole / 60),
                  static_cast<unsigned long long>(whole % 60));
  } else if (whole < 86400) {
    std::snprintf(text, sizeof text, "%lluh %02llum", static_cast<unsigned long long>(whole / 3600),
                  static_cast<unsigned long long>(whole % 3600 / 60));
  } else {
    std::snprintf(text, sizeof text, "%llud %02lluh",
                  static_cast<unsigned long long>(whole / 86400),
                  static_cast<unsigned long long>(whole % 86400 / 3600));
  }
  return text;
}

std::string format_quantum(uint64_t microseconds) {
  if (microseconds < 1000) return std::to_string(microseconds) + " us";
  return one_decimal(static_cast<double>(microseconds) / 1000.0) + " ms";
}

// None: the server does not know (used) or there is none (cap).
std::string bytes_or(const std::optional<uint64_t>& value, const char* if_none) {
  return value ? format_bytes(*value) : if_none;
}

std::string server_line(const status::Server& server) {
  return "gpulimitd " + std::to_string(server.pid) + ", " + server.mode + " mode, up " +
         format_duration(server.uptime_s) + ", quantum " + format_quantum(server.quantum_us) +
         ", socket " + server.socket + "\n";
}

std::string devices_table(const std::vector<status::BoardDevice>& devices) {
  TextTable table;
  table.add({"DEVICE", "UUID", "HOLDER", "WAITING"});
  for (const status::BoardDevice& device : devices)
    table.add({std::to_string(device.board_index), device.uuid, device.holder.value_or("-"),
               std::to_string(device.waiting)});
  return table.render();
}

std::string tenants_table(const std::vector<status::Tenant>& tenants,
                          const std::vector<status::BoardDevice>& devices) {
  // Devices by the index the first table shows them under.
  std::map<std::string, std::string> index_of;
  for (const status::BoardDevice& device : devices)
    index_of[device.uuid] = std::to_string(device.board_index);

  TextTable table;
  table.add({"TENANT", "USER", "PIDS", "SM", "WEIGHT", "PRIORITY", "DEVICE", "MEMORY USED / CAP",
             "TARGET SHARE", "ACHIEVED"});
  for (const status::Tenant& tenant : tenants) {
    std::string pids;
    for (const int64_t pid : tenant.pids) {
      if (!pids.empty()) pids += ',';
      pids += std::to_string(pid);
    }
    std::vector<std::string> first = {
        tenant.tenant,
        tenant.user,
        pids.empty() ? "-" : pids,
        tenant.sm_percent ? std::to_string(*tenant.sm_percent) + "%" : "-",
        std::to_string(tenant.weight),
        std::string(protocol::priority_name(tenant.priority)),
    };
    if (tenant.devices.empty()) {
      first.insert(first.end(), {"-", "-", "-", "-"});
      table.add(std::move(first));
      continue;
    }
    const std::size_t tenant_columns = first.size();
    bool first_row = true;
    for (const status::TenantDevice& device : tenant.devices) {
      const auto index = index_of.find(device.uuid);
      std::vector<std::string> row =
          first_row ? std::move(first) : std::vector<std::string>(tenant_columns);
      row.insert(row.end(),
                 {index != index_of.end() ? index->second : device.uuid,
                  bytes_or(device.memory_used, "-") + " / " + bytes_or(device.memory_cap, "no cap"),
                  format_percent(device.share_target), format_percent(device.share_achieved)});
      table.add(std::move(row));
      first_row = false;
    }
  }
  return table.render();
}

// Processes using a GPU without gpulimit, as the server's watcher saw them
// (none from servers that have no watcher).
std::string unmanaged_table(const std::vector<status::UnmanagedProcess>& unmanaged) {
  TextTable table;
  table.add({"UNMANAGED PID", "USER", "COMMAND", "DEVICE"});
  for (const status::UnmanagedProcess& process : unmanaged)
    table.add({std::to_string(process.pid), process.user, process.command, process.device});
  return table.render();
}

// Jobs whose main process has exited while processes of them still use
// the GPU (limiter-server/source/loop/orphans.cpp).
std::string orphans_table(const std::vector<status::Tenant>& tenants) {
  TextTable table;
  table.add({"ORPHAN", "USER", "MAIN PID", "EXITED", "STILL RUNNING", "KILLED IN"});
  bool any = false;
  for (const status::Tenant& tenant : tenants) {
    if (!tenant.orphaned_s) continue;
    any = true;
    std::string pids;
    for (const int64_t pid : tenant.pids)
      pids += (pids.empty() ? "" : ",") + std::to_string(pid);
    table.add({tenant.tenant, tenant.user, tenant.leader ? std::to_string(*tenant.leader) : "-",
               format_duration(*tenant.orphaned_s) + " ago", pids.empty() ? "-" : pids,
               tenant.orphan_kill_in_s ? format_duration(*tenant.orphan_kill_in_s) : "never"});
  }
  return any ? table.render() : std::string();
}

// The fair-share tree (token_scheduler.h): a row per group and user with
// tenants, shown once there is more than one group or user, or a share
// other than 1, to split a device between.
std::string shares_table(const std::vector<status::Tenant>& tenants) {
  struct Branch {
    std::string group;
    std::string user;
    uint32_t group_share = 1;
    uint32_t user_share = 1;
    std::vector<std::string> tenants;
  };
  std::map<std::pair<std::string, std::string>, Branch> branches;  // by group, user
  bool shared = false;
  for (const status::Tenant& tenant : tenants) {
    if (!tenant.group) continue;  // an older server: no tree to show
    Branch& branch = branches[{*tenant.group, tenant.user}];
    branch.group = *tenant.group;
    branch.user = tenant.user;
    branch.group_share = tenant.group_share.value_or(1);
    branch.user_share = tenant.user_share.value_or(1);
    branch.tenants.push_back(tenant.tenant);
    shared = shared || branch.group_share != 1 || branch.user_share != 1;
  }
  if (branches.size() < 2 && !shared) return {};
  TextTable table;
  table.add({"GROUP", "GROUP SHARE", "USER", "USER SHARE", "TENANTS"});
  for (const auto& [key, branch] : branches) {
    std::string names;
    for (const std::string& name : branch.tenants)
      names += (names.empty() ? "" : ",") + name;
    table.add({branch.group, std::to_string(branch.group_share), branch.user,
               std::to_string(branch.user_share), names});
  }
  return table.render();
}

// Each group's and user's memory_total against what its tenants hold and
// are promised.
std::string totals_table(const std::vector<status::MemoryTotal>& totals) {
  TextTable table;
  table.add({"TOTAL OF", "GPU", "USED", "LEASED", "TOTAL", "TENANTS"});
  for (const status::MemoryTotal& total : totals)
    table.add({total.scope + " " + total.name,
               total.board_index ? std::to_string(*total.board_index) : std::string("all"),
               format_bytes(total.used), format_bytes(total.promised), format_bytes(total.total),
               std::to_string(total.tenants)});
  return table.render();
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  // Up a unit also where rounding to one decimal would show 1024.
  while (value >= 1023.95 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return one_decimal(value) + " " + kUnits[unit];
}

bool render_status_table(std::string_view json_text, std::string& out, std::string& error) {
  status::Report report;
  if (!status::parse_status_report(json_text, report, error)) return false;
  std::string text = server_line(report.server);
  if (!report.devices.empty()) text += "\n" + devices_table(report.devices);
  text += report.tenants.empty() ? "\nno tenants\n"
                                 : "\n" + tenants_table(report.tenants, report.devices);
  if (const std::string shares = shares_table(report.tenants); !shares.empty())
    text += "\n" + shares;
  if (!report.memory_totals.empty()) text += "\n" + totals_table(report.memory_totals);
  if (const std::string orphans = orphans_table(report.tenants); !orphans.empty())
    text += "\n" + orphans;
  if (!report.unmanaged.empty()) text += "\n" + unmanaged_table(report.unmanaged);
  out = std::move(text);
  return true;
}

}  // namespace gpulimit::cli
