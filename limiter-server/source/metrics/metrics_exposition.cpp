#include "gpulimit/server/metrics/metrics_exposition.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

namespace gpulimit::server {
namespace {

struct Family {
  const char* name;
  const char* type;
  const char* help;
};

// Every family, in the order written. HELP texts hold no backslash or
// newline, so they need no escaping.
constexpr std::array kFamilies = {
    Family{"gpulimit_build_info", "gauge", "gpulimitd's version and mode; always 1"},
    Family{"gpulimit_uptime_seconds", "gauge", "Time since gpulimitd started"},
    Family{"gpulimit_tenants", "gauge", "Tenants with at least one process attached"},
    Family{"gpulimit_processes", "gauge", "Tenant processes attached"},
    Family{"gpulimit_tenant_processes", "gauge", "Processes of the tenant attached"},
    Family{"gpulimit_tenant_group_info", "gauge",
           "The group the tenant's first process ran as: its branch of the fair-share tree; "
           "always 1"},
    Family{"gpulimit_group_share", "gauge",
           "The group's share of a device's time against the other groups that want it"},
    Family{"gpulimit_user_share", "gauge",
           "The user's share of a device's time against the other users of the group"},
    Family{"gpulimit_memory_total_bytes", "gauge",
           "A group's or user's memory_total on the device (policy)"},
    Family{"gpulimit_memory_total_used_bytes", "gauge",
           "Device memory the tenants under the total hold, as their ledgers count it"},
    Family{"gpulimit_memory_total_leased_bytes", "gauge",
           "Device memory gpulimitd has promised the tenants under the total (their leases)"},
    Family{"gpulimit_orphan_tenants", "gauge",
           "Tenants whose job's main process has exited while they still run"},
    Family{"gpulimit_token_waiting_tenants", "gauge",
           "Tenants other than the holder that wait for the device's token"},
    Family{"gpulimit_memory_used_bytes", "gauge",
           "Device memory the tenant's processes hold, as its ledger counts it"},
    Family{"gpulimit_memory_cap_bytes", "gauge", "The tenant's device memory cap"},
    Family{"gpulimit_gpu_seconds_total", "counter", "Time the tenant held the device's token"},
    Family{"gpulimit_token_wait_seconds", "histogram",
           "Time from the tenant wanting the device's token to its grant"},
    Family{"gpulimit_token_grants_total", "counter", "Grants of the device's token to the tenant"},
    Family{"gpulimit_token_revokes_total", "counter",
           "Times the tenant was asked to give the device's token back"},
    Family{"gpulimit_token_overruns_total", "counter",
           "Times the token was taken back because the tenant did not drain within the ack "
           "timeout"},
    Family{"gpulimit_token_overrun_seconds_total", "counter",
           "Time charged to the tenant after ack timeouts: from the forced release to its late "
           "drain"},
    Family{"gpulimit_oom_denials_total", "counter",
           "Allocations refused because they would pass the tenant's memory cap"},
    Family{"gpulimit_share_target", "gauge",
           "The tenant's target share of the device under the current demand"},
    Family{"gpulimit_share_achieved", "gauge",
           "The tenant's share of the device's time over the last 10 s"},
    Family{"gpulimit_user_gpu_seconds_total", "counter",
           "Time the user's tenants, running and ended, held a device's token since gpulimitd "
           "started (with --usage-db)"},
    Family{"gpulimit_user_memory_gib_hours_total", "counter",
           "Device memory the user's tenants, running and ended, held over time since gpulimitd "
           "started, sampled every --usage-interval-ms (with --usage-db)"},
};

using Labels = std::vector<std::pair<const char*, std::string>>;

std::string format_number(double value) {
  char text[64];
  // Fixed, not scientific: bucket bounds read as 0.0001, not 1e-04.
  const auto [end, error] =
      std::to_chars(text, text + sizeof text, value, std::chars_format::fixed);
  return error == std::errc{} ? std::string(text, end) : std::string("NaN");
}

std::string format_number(uint64_t value) {
  return std::to_string(value);
}

std::string seconds(TimeNs ns) {
  return format_number(static_cast<double>(ns) / 1e9);
}

std::string seconds(uint64_t ns) {
  return format_number(static_cast<double>(ns) / 1e9);
}

class Exposition {
 public:
  // HELP and TYPE of family `name`, written before its first sample.
  void family(std::string_view name) {
    for (const Family& family : kFamilies) {
      if (family.name != name) continue;
      text_ += "# HELP " + std::string(family.name) + " " + family.help + "\n";
      text_ += "# TYPE " + std::string(family.name) + " " + family.type + "\n";
      return;
    }
  }

  void sample(std::string_view name, const Labels& labels, const std::string& value) {
    text_ += name;
    if (!labels.empty()) {
      text_ += '{';
      for (std::size_t i = 0; i < labels.size(); ++i) {
        if (i) text_ += ',';
        text_ += labels[i].first;
        text_ += "=\"" + escape_label_value(labels[i].second) + "\"";
      }
      text_ += '}';
    }
    text_ += ' ' + value + '\n';
  }

  std::string take() { return std::move(text_); }

 private:
  std::string text_;
};

using protocol::status::BoardDevice;
using protocol::status::Tenant;
using protocol::status::TenantDevice;

// One tenant on one device, with the labels of its series.
struct TenantDeviceSeries {
  const TenantDevice* device;
  const WaitHistogram* waits;
  Labels labels;
};

std::vector<TenantDeviceSeries> tenant_devices(const StatusSnapshot& snapshot) {
  static const WaitHistogram kNoWaits;
  std::vector<TenantDeviceSeries> all;
  for (const Tenant& tenant : snapshot.report.tenants) {
    for (const TenantDevice& device : tenant.devices) {
      std::string gpu;
      for (const BoardDevice& board : snapshot.report.devices)
        if (board.uuid == device.uuid) gpu = std::to_string(board.board_index);
      const auto waits = snapshot.waits.find({tenant.tenant, device.uuid});
      all.push_back(TenantDeviceSeries{&device,
                                       waits != snapshot.waits.end() ? &waits->second : &kNoWaits,
                                       Labels{{"gpu", gpu},
                                              {"UUID", device.uuid},
                                              {"tenant", tenant.tenant},
                                              {"user", tenant.user}}});
    }
  }
  return all;
}

// A family with one sample per tenant and device; `value` says nothing
// (nullopt) for a device where the figure is unknown.
template <typename Value>
void per_tenant_device(Exposition& out, const std::vector<TenantDeviceSeries>& all,
                       const char* name, Value value) {
  out.family(name);
  for (const TenantDeviceSeries& entry : all)
    if (const std::optional<std::string> text = value(*entry.device))
      out.sample(name, entry.labels, *text);
}

void wait_histogram(Exposition& out, const std::vector<TenantDeviceSeries>& all) {
  constexpr const char* kName = "gpulimit_token_wait_seconds";
  out.family(kName);
  for (const TenantDeviceSeries& entry : all) {
    const WaitHistogram& waits = *entry.waits;
    uint64_t cumulative = 0;
    Labels labels = entry.labels;
    labels.emplace_back("le", "");
    for (std::size_t i = 0; i < WaitHistogram::kUpperBoundsNs.size(); ++i) {
      cumulative += waits.in_bucket(i);
      labels.back().second = seconds(WaitHistogram::kUpperBoundsNs[i]);
      out.sample("gpulimit_token_wait_seconds_bucket", labels, format_number(cumulative));
    }
    labels.back().second = "+Inf";
    out.sample("gpulimit_token_wait_seconds_bucket", labels, format_number(waits.count()));
    out.sample("gpulimit_token_wait_seconds_sum", entry.labels, seconds(waits.sum_ns()));
    out.sample("gpulimit_token_wait_seconds_count", entry.labels, format_number(waits.count()));
  }
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string escaped;
  escaped.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '"') {
      escaped += "\\\"";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

std::vector<std::string> metric_family_names() {
  std::vector<std::string> names;
  for (const Family& family : kFamilies)
    names.emplace_back(family.name);
  return names;
}

std::string render_metrics(const StatusSnapshot& snapshot, std::string_view version) {
  const protocol::status::Report& status = snapshot.report;
  Exposition out;
  out.family("gpulimit_build_info");
  out.sample("gpulimit_build_info",
             {{"version", std::string(version)}, {"mode", status.server.mode}}, "1");
  out.family("gpulimit_uptime_seconds");
  out.sample("gpulimit_uptime_seconds", {}, format_number(status.server.uptime_s));

  uint64_t processes = 0;
  for (const Tenant& tenant : status.tenants)
    processes += tenant.pids.size();
  out.family("gpulimit_tenants");
  out.sample("gpulimit_tenants", {}, format_number(uint64_t{status.tenants.size()}));
  out.family("gpulimit_processes");
  out.sample("gpulimit_processes", {}, format_number(processes));
  out.family("gpulimit_tenant_processes");
  for (const Tenant& tenant : status.tenants)
    out.sample("gpulimit_tenant_processes", {{"tenant", tenant.tenant}, {"user", tenant.user}},
               format_number(uint64_t{tenant.pids.size()}));
  // The fair-share tree: each group and each user of a group once, with
  // its share as its tenants were given it.
  std::map<std::string, uint32_t> group_shares;
  std::map<std::pair<std::string, std::string>, uint32_t> user_shares;
  out.family("gpulimit_tenant_group_info");
  for (const Tenant& tenant : status.tenants) {
    if (!tenant.group) continue;
    out.sample("gpulimit_tenant_group_info",
               {{"tenant", tenant.tenant}, {"user", tenant.user}, {"group", *tenant.group}}, "1");
    group_shares[*tenant.group] = tenant.group_share.value_or(1);
    user_shares[{*tenant.group, tenant.user}] = tenant.user_share.value_or(1);
  }
  out.family("gpulimit_group_share");
  for (const auto& [group, share] : group_shares)
    out.sample("gpulimit_group_share", {{"group", group}}, format_number(uint64_t{share}));
  out.family("gpulimit_user_share");
  for (const auto& [branch, share] : user_shares)
    out.sample("gpulimit_user_share", {{"group", branch.first}, {"user", branch.second}},
               format_number(uint64_t{share}));
  using MemoryTotal = protocol::status::MemoryTotal;
  for (const auto& [family, figure] :
       {std::pair{"gpulimit_memory_total_bytes", &MemoryTotal::total},
        std::pair{"gpulimit_memory_total_used_bytes", &MemoryTotal::used},
        std::pair{"gpulimit_memory_total_leased_bytes", &MemoryTotal::promised}}) {
    out.family(family);
    for (const MemoryTotal& total : status.memory_totals)
      out.sample(family,
                 {{"scope", total.scope},
                  {"name", total.name},
                  {"gpu", total.board_index ? std::to_string(*total.board_index) : "all"},
                  {"UUID", total.uuid.value_or("")}},
                 format_number(total.*figure));
  }
  out.family("gpulimit_orphan_tenants");
  out.sample("gpulimit_orphan_tenants", {},
             format_number(static_cast<uint64_t>(std::count_if(
                 status.tenants.begin(), status.tenants.end(),
                 [](const Tenant& tenant) { return tenant.orphaned_s.has_value(); }))));

  out.family("gpulimit_token_waiting_tenants");
  for (const BoardDevice& device : status.devices)
    out.sample("gpulimit_token_waiting_tenants",
               {{"gpu", std::to_string(device.board_index)}, {"UUID", device.uuid}},
               format_number(uint64_t{device.waiting}));

  using Figure = std::optional<std::string>;
  const std::vector<TenantDeviceSeries> all = tenant_devices(snapshot);
  per_tenant_device(out, all, "gpulimit_memory_used_bytes", [](const TenantDevice& d) {
    return d.memory_used ? Figure(format_number(*d.memory_used)) : std::nullopt;
  });
  per_tenant_device(out, all, "gpulimit_memory_cap_bytes", [](const TenantDevice& d) {
    return d.memory_cap ? Figure(format_number(*d.memory_cap)) : std::nullopt;
  });
  per_tenant_device(out, all, "gpulimit_gpu_seconds_total",
                    [](const TenantDevice& d) { return Figure(seconds(d.held_ns)); });
  wait_histogram(out, all);
  per_tenant_device(out, all, "gpulimit_token_grants_total", [](const TenantDevice& d) {
    return d.grants ? Figure(format_number(*d.grants)) : std::nullopt;
  });
  per_tenant_device(out, all, "gpulimit_token_revokes_total", [](const TenantDevice& d) {
    return d.revokes ? Figure(format_number(*d.revokes)) : std::nullopt;
  });
  per_tenant_device(out, all, "gpulimit_token_overruns_total", [](const TenantDevice& d) {
    return d.overruns ? Figure(format_number(*d.overruns)) : std::nullopt;
  });
  per_tenant_device(out, all, "gpulimit_token_overrun_seconds_total", [](const TenantDevice& d) {
    return d.overrun_ns ? Figure(seconds(*d.overrun_ns)) : std::nullopt;
  });
  per_tenant_device(out, all, "gpulimit_oom_denials_total", [](const TenantDevice& d) {
    return d.oom_denials ? Figure(format_number(*d.oom_denials)) : std::nullopt;
  });
  per_tenant_device(out, all, "gpulimit_share_target",
                    [](const TenantDevice& d) { return Figure(format_number(d.share_target)); });
  per_tenant_device(out, all, "gpulimit_share_achieved",
                    [](const TenantDevice& d) { return Figure(format_number(d.share_achieved)); });
  out.family("gpulimit_user_gpu_seconds_total");
  for (const auto& [user, used] : snapshot.usage)
    out.sample("gpulimit_user_gpu_seconds_total", {{"user", user}},
               format_number(used.gpu_seconds));
  out.family("gpulimit_user_memory_gib_hours_total");
  for (const auto& [user, used] : snapshot.usage)
    out.sample("gpulimit_user_memory_gib_hours_total", {{"user", user}},
               format_number(used.gib_hours));
  return out.take();
}

}  // namespace gpulimit::server
