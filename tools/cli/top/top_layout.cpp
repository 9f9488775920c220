#include "top/top_layout.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

#include "common/decimal_text.h"

namespace gpulimit::cli {
namespace {

std::string whole_percent(double fraction) {
  char text[64];
  std::snprintf(text, sizeof text, "%.0f%%", std::max(0.0, fraction) * 100.0);
  return text;
}

// Unknown sorts after every known figure, whichever way the known sort.
template <typename T>
int compare_descending(const std::optional<T>& a, const std::optional<T>& b) {
  if (a.has_value() != b.has_value()) return a.has_value() ? -1 : 1;
  if (!a || *a == *b) return 0;
  return *a > *b ? -1 : 1;
}

// The table's columns, in the order they are shown.
enum Column : std::size_t { kUser, kTenant, kPids, kMemory, kBar, kShare, kWait, kOom, kCommand };
constexpr std::size_t kColumnCount = kCommand + 1;

struct ColumnSpec {
  const char* heading;
  bool right_aligned;
  std::size_t most;  // wider content is cut to this
};

constexpr std::array<ColumnSpec, kColumnCount> kColumns = {{
    {"USER", false, 12},
    {"TENANT", false, 28},
    {"PIDS", false, 20},
    {"MEM/CAP", true, 32},
    {"MEMORY", false, 12},
    {"SHARE/TGT", true, 16},
    {"WAIT", true, 8},
    {"OOM", true, 20},
    {"COMMAND", false, 0},  // what is left of the line
}};

constexpr std::size_t kBarWidth = 12;
constexpr std::size_t kNarrowBarWidth = 7;
// The command column is only worth showing this wide.
constexpr std::size_t kCommandLeast = 8;

// A cell's text before it is fitted to its column.
std::string cell(const TopRow& row, Column column, std::size_t width) {
  const bool known = row.share_achieved.has_value();  // on a device
  switch (column) {
    case kUser:
      return printable(row.user);
    case kTenant:
      return printable(row.tenant);
    case kPids:
      return format_pids(row.pids, width);
    case kMemory:
      return known ? memory_text(row.memory_used, row.memory_cap) : "-";
    case kBar:
      return known ? memory_bar(row.memory_used, row.memory_cap, width) : "";
    case kShare:
      return share_text(row.share_achieved, row.share_target);
    case kWait:
      return format_wait(row.wait_ns);
    case kOom:
      return row.oom_denials ? std::to_string(*row.oom_denials) : "-";
    case kCommand:
      return (row.orphan ? "(orphan) " : "") +
             (row.command.empty() ? std::string("-") : printable(row.command));
  }
  return "";
}

struct Layout {
  std::array<bool, kColumnCount> shown{};
  std::array<std::size_t, kColumnCount> width{};
};

// Every column but the command, each followed by one space, and the
// command's least width.
std::size_t needed(const Layout& layout) {
  std::size_t total = 0;
  for (std::size_t c = 0; c < kCommand; ++c)
    if (layout.shown[c]) total += layout.width[c] + 1;
  return total + (layout.shown[kCommand] ? kCommandLeast : 0);
}

Layout choose_layout(const std::vector<TopRow>& rows, std::size_t width) {
  Layout layout;
  for (std::size_t c = 0; c < kColumnCount; ++c) {
    layout.shown[c] = true;
    layout.width[c] = std::string_view(kColumns[c].heading).size();
  }
  layout.width[kBar] = kBarWidth;
  for (const TopRow& row : rows) {
    for (std::size_t c = 0; c < kCommand; ++c) {
      if (c == kBar) continue;
      const std::size_t natural = cell(row, Column(c), kColumns[c].most).size();
      layout.width[c] = std::max(layout.width[c], std::min(natural, kColumns[c].most));
    }
  }
  // Shortened first, then dropped, in this order, until the line fits.
  const auto shrink = [&](Column c, std::size_t to) {
    if (needed(layout) > width) layout.width[c] = std::min(layout.width[c], to);
  };
  const auto drop = [&](Column c) {
    if (needed(layout) > width) layout.shown[c] = false;
  };
  shrink(kTenant, 12);
  drop(kTenant);
  shrink(kPids, 9);
  shrink(kUser, 8);
  shrink(kBar, kNarrowBarWidth);
  drop(kPids);
  drop(kWait);
  drop(kBar);
  shrink(kUser, 4);
  drop(kCommand);
  drop(kOom);
  return layout;
}

std::string trim_right(std::string line) {
  while (!line.empty() && line.back() == ' ')
    line.pop_back();
  return line;
}

// `cells` (by column, the command's last) in the layout's columns.
std::string table_line(const Layout& layout, const std::array<std::string, kColumnCount>& cells,
                       std::size_t width) {
  std::string line;
  for (std::size_t c = 0; c < kCommand; ++c) {
    if (!layout.shown[c]) continue;
    const std::string text = fit(cells[c], layout.width[c]);
    const std::string pad(layout.width[c] - text.size(), ' ');
    line += kColumns[c].right_aligned ? pad + text : text + pad;
    line += ' ';
  }
  if (layout.shown[kCommand] && line.size() < width)
    line += fit(cells[kCommand], width - line.size());
  return fit(trim_right(std::move(line)), width);
}

std::string row_line(const Layout& layout, const TopRow& row, std::size_t width) {
  std::array<std::string, kColumnCount> cells;
  for (std::size_t c = 0; c < kColumnCount; ++c)
    if (layout.shown[c]) cells[c] = cell(row, Column(c), layout.width[c]);
  return table_line(layout, cells, width);
}

std::string heading_line(const Layout& layout, std::size_t width) {
  std::array<std::string, kColumnCount> cells;
  for (std::size_t c = 0; c < kColumnCount; ++c)
    cells[c] = kColumns[c].heading;
  return table_line(layout, cells, width);
}

// The first of `choices` that fits, else the last one cut.
std::string first_fitting(std::initializer_list<std::string> choices, std::size_t width) {
  for (const std::string& choice : choices)
    if (choice.size() <= width) return choice;
  return fit(*(choices.end() - 1), width);
}

std::string title_line(const TopFrameInput& input, std::size_t width) {
  const std::string start = "top " + input.clock + "  ";
  if (!input.snapshot) return fit(start + "no server", width);
  const protocol::status::Server& server = input.snapshot->server;
  const std::string tenants = std::to_string(input.snapshot->tenants.size()) +
                              (input.snapshot->tenants.size() == 1 ? " tenant" : " tenants");
  const std::string pid = "gpulimitd " + std::to_string(server.pid);
  const std::string up =
      "up " + format_wait(static_cast<uint64_t>(std::max(0.0, server.uptime_s) * 1e9));
  const std::string quantum =
      "quantum " + one_decimal(static_cast<double>(server.quantum_us) / 1000.0) + "ms";
  return first_fitting(
      {start + pid + " " + server.mode + " mode, " + up + ", " + quantum + ", " + tenants,
       start + pid + ", " + up + ", " + tenants, start + tenants},
      width);
}

std::string keys_line(TopSortKey sort, std::size_t width) {
  const std::string by = std::string(sort_key_name(sort));
  return first_fitting({"sort: m memory  s share  w wait  u user  o OOM   q quit   sorted by " + by,
                        "sort: m s w u o   q quit   by " + by, "m s w u o q"},
                       width);
}

std::string device_line(const std::string& name, const std::string& uuid,
                        const std::optional<std::string>& holder, std::optional<uint64_t> waiting,
                        std::size_t width) {
  std::string state;
  if (waiting) {
    state = ", " + (holder ? "held by " + printable(*holder) : std::string("token free")) + ", " +
            std::to_string(*waiting) + " waiting";
  }
  const std::string named = uuid.empty() ? name : name + " " + printable(uuid);
  return first_fitting({named + state, name + state}, width);
}

// "  group ml: 12.0G used, 16.0G leased of 40.0G": a memory_total on the
// device, under its line.
std::string total_line(const protocol::status::MemoryTotal& total, std::size_t width) {
  const std::string who = total.scope + " " + printable(total.name);
  return first_fitting(
      {"  " + who + ": " + compact_bytes(total.used) + " used, " + compact_bytes(total.promised) +
           " leased of " + compact_bytes(total.total),
       "  " + who + ": " + compact_bytes(total.used) + " of " + compact_bytes(total.total)},
      width);
}

std::string no_server_line(const TopFrameInput& input, std::size_t width) {
  return fit("no server: " + printable(input.problem) + "; retrying every " +
                 one_decimal(input.interval_s) + "s",
             width);
}

TopRow row_of(const protocol::status::Tenant& tenant,
              const protocol::status::TenantDevice* device) {
  TopRow row;
  row.tenant = tenant.tenant;
  row.user = tenant.user;
  row.command = tenant.command.value_or("");
  row.pids = tenant.pids;
  row.orphan = tenant.orphaned_s.has_value();
  if (device) {
    row.memory_used = device->memory_used;
    row.memory_cap = device->memory_cap;
    row.share_achieved = device->share_achieved;
    row.share_target = device->share_target;
    row.wait_ns = device->wait_ns;
    row.oom_denials = device->oom_denials;
  }
  return row;
}

// A device and the rows of the tenants that use it; `waiting` is known for
// the devices in the snapshot's device list.
struct Group {
  std::string name;
  std::string uuid;
  std::optional<std::string> holder;
  std::optional<uint64_t> waiting;
  std::vector<TopRow> rows;
};

std::vector<Group> groups_of(const protocol::status::Report& snapshot, TopSortKey sort) {
  std::vector<Group> groups;
  std::map<std::string, std::size_t> by_uuid;
  for (const protocol::status::BoardDevice& device : snapshot.devices) {
    by_uuid.emplace(device.uuid, groups.size());
    Group& group = groups.emplace_back();
    group.name = "GPU " + std::to_string(device.board_index);
    group.uuid = device.uuid;
    group.holder = device.holder;
    group.waiting = device.waiting;
  }
  Group no_device;
  no_device.name = "no device yet";
  for (const protocol::status::Tenant& tenant : snapshot.tenants) {
    if (tenant.devices.empty()) no_device.rows.push_back(row_of(tenant, nullptr));
    for (const protocol::status::TenantDevice& device : tenant.devices) {
      auto [at, added] = by_uuid.emplace(device.uuid, groups.size());
      if (added) {
        // A device the server's list does not name: shown by its UUID.
        Group& group = groups.emplace_back();
        group.name = "GPU ?";
        group.uuid = device.uuid;
      }
      groups[at->second].rows.push_back(row_of(tenant, &device));
    }
  }
  if (!no_device.rows.empty()) groups.push_back(std::move(no_device));
  for (Group& group : groups)
    sort_rows(group.rows, sort);
  return groups;
}

}  // namespace

std::optional<TopSortKey> sort_key_for(char key) {
  switch (std::tolower(static_cast<unsigned char>(key))) {
    case 'm':
      return TopSortKey::kMemory;
    case 's':
      return TopSortKey::kShare;
    case 'w':
      return TopSortKey::kWait;
    case 'u':
      return TopSortKey::kUser;
    case 'o':
      return TopSortKey::kOom;
    default:
      return std::nullopt;
  }
}

std::string_view sort_key_name(TopSortKey key) {
  switch (key) {
    case TopSortKey::kMemory:
      return "memory";
    case TopSortKey::kShare:
      return "share";
    case TopSortKey::kWait:
      return "wait";
    case TopSortKey::kUser:
      return "user";
    case TopSortKey::kOom:
      return "OOM";
  }
  return "memory";
}

void sort_rows(std::vector<TopRow>& rows, TopSortKey key) {
  const auto order = [key](const TopRow& a, const TopRow& b) {
    int by = 0;
    switch (key) {
      case TopSortKey::kMemory:
        by = compare_descending(a.memory_used, b.memory_used);
        break;
      case TopSortKey::kShare:
        by = compare_descending(a.share_achieved, b.share_achieved);
        break;
      case TopSortKey::kWait:
        by = compare_descending(a.wait_ns, b.wait_ns);
        break;
      case TopSortKey::kUser:
        by = a.user.compare(b.user);
        break;
      case TopSortKey::kOom:
        by = compare_descending(a.oom_denials, b.oom_denials);
        break;
    }
    if (by != 0) return by < 0;
    return a.tenant < b.tenant;
  };
  std::stable_sort(rows.begin(), rows.end(), order);
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      out += c;
    } else if ((byte & 0xc0) != 0x80) {  // not a UTF-8 continuation byte
      out += '?';
    }
  }
  return out;
}

std::string fit(std::string_view text, std::size_t width) {
  if (text.size() <= width) return std::string(text);
  if (width == 0) return "";
  return std::string(text.substr(0, width - 1)) + '+';
}

std::string format_pids(const std::vector<int64_t>& pids, std::size_t width) {
  if (pids.empty()) return "-";
  std::string all;
  for (const int64_t pid : pids)
    all += (all.empty() ? "" : ",") + std::to_string(pid);
  if (all.size() <= width) return all;
  // As many pids as leave room for ",+N" (or "+N" alone).
  std::string kept;
  std::size_t count = 0;
  for (const int64_t pid : pids) {
    const std::string next = (kept.empty() ? "" : kept + ",") + std::to_string(pid);
    const bool last = count + 1 == pids.size();
    const std::string rest = last ? "" : ",+" + std::to_string(pids.size() - count - 1);
    if (next.size() + rest.size() > width) break;
    kept = next;
    ++count;
  }
  if (count == 0) return "+" + std::to_string(pids.size());
  return kept + ",+" + std::to_string(pids.size() - count);
}

std::string compact_bytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + "B";
  static constexpr char kUnits[] = {'K', 'M', 'G', 'T', 'P', 'E'};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  // Up a unit also where rounding to one decimal would show 1024.
  while (value >= 1023.95 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return one_decimal(value) + kUnits[unit];
}

std::string memory_text(std::optional<uint64_t> used, std::optional<uint64_t> cap) {
  return (used ? compact_bytes(*used) : "-") + "/" + (cap ? compact_bytes(*cap) : "-");
}

std::string memory_bar(std::optional<uint64_t> used, std::optional<uint64_t> cap,
                       std::size_t width) {
  if (width < 3) return std::string(width, ' ');
  const std::size_t inner = width - 2;
  // The first word that fits, centred.
  const auto centred = [inner](std::initializer_list<std::string_view> words) {
    std::string_view text = "";
    for (const std::string_view word : words) {
      text = word;
      if (word.size() <= inner) break;
    }
    if (text.size() > inner) text = "";
    const std::size_t left = (inner - text.size()) / 2;
    return std::string(left, ' ') + std::string(text) +
           std::string(inner - text.size() - left, ' ');
  };
  std::string cells;
  if (!cap) {
    cells = centred({"no cap", "none", "-"});
  } else if (!used) {
    cells = centred({"?"});
  } else if (*used > *cap) {
    cells = std::string(inner, '!');
  } else {
    const double fraction =
        *cap == 0 ? 1.0 : static_cast<double>(*used) / static_cast<double>(*cap);
    auto filled = static_cast<std::size_t>(std::lround(fraction * static_cast<double>(inner)));
    // Some use is never an empty bar, and a full bar means the cap is reached.
    if (*used > 0 && filled == 0) filled = 1;
    if (*used < *cap && filled == inner) filled = inner - 1;
    cells = std::string(filled, '#') + std::string(inner - filled, '.');
  }
  return "[" + cells + "]";
}

std::string format_wait(std::optional<uint64_t> ns) {
  if (!ns) return "-";
  char text[64];
  const uint64_t ms = *ns / 1'000'000;
  const uint64_t s = *ns / 1'000'000'000;
  const auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  if (*ns == 0) return "0s";
  if (ms < 1000) {
    std::snprintf(text, sizeof text, "%llums", u(ms));
  } else if (s < 60) {
    return one_decimal(std::floor(static_cast<double>(ms) / 100.0) / 10.0) + "s";
  } else if (s < 3600) {
    std::snprintf(text, sizeof text, "%llum%02llus", u(s / 60), u(s % 60));
  } else if (s < 86400) {
    std::snprintf(text, sizeof text, "%lluh%02llum", u(s / 3600), u(s % 3600 / 60));
  } else {
    std::snprintf(text, sizeof text, "%llud%02lluh", u(s / 86400), u(s % 86400 / 3600));
  }
  return text;
}

std::string share_text(std::optional<double> achieved, std::optional<double> target) {
  return (achieved ? whole_percent(*achieved) : "-") + "/" +
         (target ? whole_percent(*target) : "-");
}

TopFrame render_top_frame(const TopFrameInput& input, std::size_t width) {
  TopFrame frame;
  frame.lines.push_back(title_line(input, width));
  frame.lines.push_back(keys_line(input.sort, width));
  if (!input.snapshot) {
    frame.lines.push_back("");
    frame.lines.push_back(no_server_line(input, width));
    return frame;
  }
  const std::vector<Group> groups = groups_of(*input.snapshot, input.sort);
  std::vector<TopRow> all;
  for (const Group& group : groups)
    all.insert(all.end(), group.rows.begin(), group.rows.end());
  const Layout layout = choose_layout(all, width);

  frame.heading_line = frame.lines.size();
  frame.has_heading = true;
  frame.lines.push_back(heading_line(layout, width));
  for (const Group& group : groups) {
    frame.lines.push_back(device_line(group.name, group.uuid, group.holder, group.waiting, width));
    for (const protocol::status::MemoryTotal& total : input.snapshot->memory_totals)
      if (total.uuid && *total.uuid == group.uuid) frame.lines.push_back(total_line(total, width));
    for (const TopRow& row : group.rows)
      frame.lines.push_back(row_line(layout, row, width));
  }
  // Totals of every device together, after the devices.
  bool all_named = false;
  for (const protocol::status::MemoryTotal& total : input.snapshot->memory_totals) {
    if (total.uuid) continue;
    if (!all_named) frame.lines.push_back(fit("all GPUs", width));
    all_named = true;
    frame.lines.push_back(total_line(total, width));
  }
  if (input.snapshot->tenants.empty()) frame.lines.push_back("no tenants");
  return frame;
}

}  // namespace gpulimit::cli
