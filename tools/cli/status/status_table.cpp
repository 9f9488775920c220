#include "status/status_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "common/decimal_text.h"

namespace gpulimit::cli {
namespace {

using nlohmann::json;

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

// null: the server does not know (used) or there is none (cap).
std::string bytes_or(const json& value, const char* if_null) {
  return value.is_null() ? if_null : format_bytes(value.get<uint64_t>());
}

std::string server_line(const json& server) {
  // A braced list is evaluated in order: an error names the first field
  // missing.
  const std::string fields[] = {
      std::to_string(server.at("pid").get<int64_t>()),
      server.at("mode").get<std::string>(),
      server.at("socket").get<std::string>(),
      format_quantum(server.at("quantum_us").get<uint64_t>()),
      format_duration(server.at("uptime_s").get<double>()),
  };
  server.at("protocol").get<uint64_t>();
  return "gpulimitd " + fields[0] + ", " + fields[1] + " mode, up " + fields[4] + ", quantum " +
         fields[3] + ", socket " + fields[2] + "\n";
}

std::string devices_table(const json& devices) {
  TextTable table;
  table.add({"DEVICE", "UUID", "HOLDER", "WAITING"});
  for (const json& device : devices) {
    const json& holder = device.at("holder");
    table.add({std::to_string(device.at("board_index").get<uint64_t>()),
               device.at("uuid").get<std::string>(),
               holder.is_null() ? "-" : holder.get<std::string>(),
               std::to_string(device.at("waiting").get<uint64_t>())});
  }
  return table.render();
}

std::string tenants_table(const json& tenants, const json& devices) {
  // Devices by the index the first table shows them under.
  std::map<std::string, std::string> index_of;
  for (const json& device : devices)
    index_of[device.at("uuid").get<std::string>()] =
        std::to_string(device.at("board_index").get<uint64_t>());

  TextTable table;
  table.add({"TENANT", "USER", "PIDS", "SM", "WEIGHT", "PRIORITY", "DEVICE", "MEMORY USED / CAP",
             "TARGET SHARE", "ACHIEVED"});
  for (const json& tenant : tenants) {
    const json& pid_list = tenant.at("pids");
    const json& used = tenant.at("devices");
    if (!pid_list.is_array() || !used.is_array())
      throw std::invalid_argument("a tenant's pids and devices must be lists");
    std::string pids;
    for (const json& pid : pid_list) {
      if (!pids.empty()) pids += ',';
      pids += std::to_string(pid.get<int64_t>());
    }
    const json& sm = tenant.at("sm_percent");
    std::vector<std::string> first = {
        tenant.at("tenant").get<std::string>(),
        tenant.at("user").get<std::string>(),
        pids.empty() ? "-" : pids,
        sm.is_null() ? "-" : std::to_string(sm.get<uint64_t>()) + "%",
        std::to_string(tenant.at("weight").get<uint64_t>()),
        tenant.at("priority").get<std::string>(),
    };
    // Checked even when there is no device row to show them in.
    tenant.at("number").get<uint64_t>();
    tenant.at("uid").get<uint64_t>();

    if (used.empty()) {
      first.insert(first.end(), {"-", "-", "-", "-"});
      table.add(std::move(first));
      continue;
    }
    const std::size_t tenant_columns = first.size();
    bool first_row = true;
    for (const json& device : used) {
      const std::string uuid = device.at("uuid").get<std::string>();
      const auto index = index_of.find(uuid);
      std::vector<std::string> row =
          first_row ? std::move(first) : std::vector<std::string>(tenant_columns);
      // One field after the other, as in server_line.
      const std::string used_bytes = bytes_or(device.at("memory_used"), "-");
      const std::string cap_bytes = bytes_or(device.at("memory_cap"), "no cap");
      const std::string target = format_percent(device.at("share_target").get<double>());
      const std::string achieved = format_percent(device.at("share_achieved").get<double>());
      device.at("held_ns").get<uint64_t>();
      row.insert(row.end(), {index != index_of.end() ? index->second : uuid,
                             used_bytes + " / " + cap_bytes, target, achieved});
      table.add(std::move(row));
      first_row = false;
    }
  }
  return table.render();
}

// Processes using a GPU without gpulimit, as the server's watcher saw them
// (absent from servers that have no watcher).
std::string unmanaged_table(const json& unmanaged) {
  TextTable table;
  table.add({"UNMANAGED PID", "USER", "COMMAND", "DEVICE"});
  for (const json& process : unmanaged)
    table.add({std::to_string(process.at("pid").get<int64_t>()),
               process.at("user").get<std::string>(), process.at("command").get<std::string>(),
               process.at("device").get<std::string>()});
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
  try {
    const json status = json::parse(json_text);
    std::string text = server_line(status.at("server"));
    const json& devices = status.at("devices");
    const json& tenants = status.at("tenants");
    if (!devices.is_array() || !tenants.is_array())
      throw std::invalid_argument("devices and tenants must be lists");
    if (!devices.empty()) text += "\n" + devices_table(devices);
    text += tenants.empty() ? "\nno tenants\n" : "\n" + tenants_table(tenants, devices);
    if (const auto unmanaged = status.find("unmanaged"); unmanaged != status.end()) {
      if (!unmanaged->is_array()) throw std::invalid_argument("unmanaged must be a list");
      if (!unmanaged->empty()) text += "\n" + unmanaged_table(*unmanaged);
    }
    out = std::move(text);
    return true;
  } catch (const json::exception& failure) {
    error = std::string("malformed status from gpulimitd: ") + failure.what();
    return false;
  } catch (const std::invalid_argument& failure) {
    error = std::string("malformed status from gpulimitd: ") + failure.what();
    return false;
  }
}

}  // namespace gpulimit::cli
