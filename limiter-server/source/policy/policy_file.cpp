#include "gpulimit/server/policy/policy_file.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "gpulimit/options/values.h"
#include "gpulimit/protocol/priority.h"
#include "gpulimit/server/policy/limits_policy.h"

namespace gpulimit::server {
namespace {

// A policy is a few kilobytes; a file far larger is a mistake.
constexpr off_t kMaxPolicyFileBytes = off_t{1} << 20;

// The first error of a file: it is refused whole, so reading stops there.
struct PolicyError {
  std::string message;
};

// What the file says, quoted in a message (a key, a value, the text TOML
// could not read), made fit for one log line: a control character would
// split the line or reach the administrator's terminal, so it becomes '?'.
std::string one_line(std::string text) {
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return text;
}

std::string position(const std::string& path, const toml::source_region& where) {
  return path + ":" + std::to_string(where.begin.line) + ":" + std::to_string(where.begin.column);
}

// A setting's value as text for the option parsers, which are the ones the
// command line and the library use: "10G" and 10G mean the same everywhere.
// Integers are accepted where a number is meant (sm = 30, memory = 4096).
std::optional<std::string> as_text(const toml::node& node) {
  if (const auto* text = node.as_string()) return text->get();
  if (const auto* number = node.as_integer())
    return number->get() < 0 ? "-" + std::to_string(-number->get()) : std::to_string(number->get());
  return std::nullopt;
}

std::string shown(const toml::node& node) {
  std::ostringstream out;
  if (const auto* text = node.as_string()) {
    out << '"' << text->get() << '"';
  } else {
    node.visit([&out](const auto& value) { out << value; });
  }
  return out.str();
}

std::string amount_text(const options::Amount& amount) {
  if (amount.kind == options::Amount::Kind::kPercent) return std::to_string(amount.value) + "%";
  return format_size(amount.value);
}

class PolicyReader {
 public:
  PolicyReader(const std::string& path, const PolicyLookups& lookups)
      : path_(path), lookups_(lookups) {}

  LoadedPolicy read(const toml::table& root) {
    auto policy = std::make_shared<Policy>();
    policy->path = path_;
    for (const auto& [key, node] : root) {
      const std::string name(key.str());
      if (name == "defaults") {
        policy->defaults = entry(node, "[defaults]");
        no_totals_in_defaults(policy->defaults, node);
      } else if (name == "users" || name == "groups") {
        read_named_entries(*policy, name == "users", node);
      } else if (name == "fair_share") {
        read_fair_share(*policy, node);
      } else {
        warn(key.source(), "unknown key '" + name + "' ignored");
      }
    }
    // A table's keys come sorted by name: warnings go back in file order.
    std::stable_sort(warnings_.begin(), warnings_.end(), [](const Warning& a, const Warning& b) {
      return std::pair(a.line, a.column) < std::pair(b.line, b.column);
    });
    LoadedPolicy loaded{std::move(policy), {}};
    for (Warning& warning : warnings_)
      loaded.warnings.push_back(one_line(std::move(warning.text)));
    return loaded;
  }

 private:
  [[noreturn]] void error(const toml::source_region& where, const std::string& what) const {
    throw PolicyError{position(path_, where) + ": " + what};
  }
  void warn(const toml::source_region& where, const std::string& what) {
    warnings_.push_back(
        {where.begin.line, where.begin.column, position(path_, where) + ": " + what});
  }

  const toml::table& table_of(const toml::node& node, const std::string& what) const {
    const toml::table* table = node.as_table();
    if (!table) error(node.source(), what + " must be a table");
    return *table;
  }

  // A total is a group's or a user's own: [defaults] would give each group
  // one of its own, which nobody could tell from the file.
  void no_totals_in_defaults(const PolicyEntry& defaults, const toml::node& node) {
    bool set = defaults.all_devices.memory_total || defaults.memory_total_all;
    for (const auto& [uuid, section] : defaults.device)
      set = set || section.memory_total.has_value();
    if (set)
      error(node.source(),
            "memory_total and memory_total_all belong in [groups.NAME] or [users.NAME], not "
            "[defaults]");
  }

  void read_named_entries(Policy& policy, bool users, const toml::node& node) {
    const char* kind = users ? "users" : "groups";
    std::map<unsigned, std::string> labels;
    for (const auto& [key, value] : table_of(node, kind)) {
      const std::string name(key.str());
      const std::string label = std::string("[") + kind + "." + name + "]";
      PolicyEntry read = entry(value, label);
      const std::optional<unsigned> id = users ? user_id(key, name) : group_id(key, name);
      if (!id) continue;
      auto& entries = users ? policy.users : policy.groups;
      const auto [named, fresh] = labels.emplace(*id, label);
      if (!fresh)
        error(key.source(), label + " and " + named->second + " both name " +
                                (users ? "uid " : "gid ") + std::to_string(*id));
      entries.emplace(*id, std::move(read));
    }
  }

  void read_fair_share(Policy& policy, const toml::node& node) {
    for (const auto& [key, value] : table_of(node, "[fair_share]")) {
      const std::string name(key.str());
      if (name != "half_life") {
        warn(key.source(), "unknown key '" + name + "' in [fair_share] ignored");
        continue;
      }
      policy.usage_half_life_s = seconds(name, value, " (no history)", kMaxHalfLifeSeconds);
    }
  }

  // A name or a number; an unknown one is a warning and the entry applies
  // to nobody (until a reload finds it).
  std::optional<unsigned> user_id(const toml::key& key, const std::string& name) {
    if (options::all_digits(name)) {
      const auto uid = static_cast<uid_t>(std::stoul(name));
      if (!lookups_.uid_known(uid)) warn(key.source(), "no user has uid " + name);
      return uid;
    }
    if (std::optional<uid_t> uid = lookups_.user_id(name)) return *uid;
    warn(key.source(), "unknown user '" + name + "'; its entry applies to nobody");
    return std::nullopt;
  }
  std::optional<unsigned> group_id(const toml::key& key, const std::string& name) {
    if (options::all_digits(name)) {
      const auto gid = static_cast<gid_t>(std::stoul(name));
      if (!lookups_.gid_known(gid)) warn(key.source(), "no group has gid " + name);
      return gid;
    }
    if (std::optional<gid_t> gid = lookups_.group_id(name)) return *gid;
    warn(key.source(), "unknown group '" + name + "'; its entry applies to nobody");
    return std::nullopt;
  }

  PolicyEntry entry(const toml::node& node, const std::string& label) {
    PolicyEntry read;
    for (const auto& [key, value] : table_of(node, label)) {
      const std::string name(key.str());
      if (setting(read.all_devices, name, value)) continue;
      if (name == "device") {
        read_device_sections(read, value, label);
      } else if (name == "devices") {
        read.allowed_devices = device_list(value);
      } else if (name == "unmanaged") {
        read.unmanaged = unmanaged(value);
      } else if (name == "orphans") {
        read.orphans = orphans(value);
      } else if (name == "orphan_grace") {
        read.orphan_grace_s = orphan_grace(value);
      } else if (name == "share") {
        read.share = weight(name, value);
      } else if (name == "memory_total_all") {
        read.memory_total_all = total(name, value);
      } else {
        warn(key.source(), "unknown key '" + name + "' in " + label + " ignored");
      }
    }
    check_defaults_within_maxima(read.all_devices, node);
    return read;
  }

  void read_device_sections(PolicyEntry& read, const toml::node& node, const std::string& label) {
    for (const auto& [key, value] : table_of(node, label + " device")) {
      const std::string name(key.str());
      const std::string section = label + " device." + name;
      const std::optional<GpuUuid> uuid = device_key(key.source(), name);
      PolicySettings settings;
      for (const auto& [setting_key, setting_value] : table_of(value, section)) {
        const std::string setting_name(setting_key.str());
        if (!setting(settings, setting_name, setting_value))
          warn(setting_key.source(),
               "unknown key '" + setting_name + "' in " + section + " ignored");
      }
      check_defaults_within_maxima(settings, value);
      if (uuid && !read.device.emplace(*uuid, settings).second)
        error(key.source(), section + " names a device another section of " + label + " names");
    }
  }

  // Reads `name` into `settings` if it is a setting; false if it is not one.
  bool setting(PolicySettings& settings, const std::string& name, const toml::node& value) {
    if (name == "memory" || name == "max_memory") {
      (name == "memory" ? settings.memory : settings.max_memory) = amount(name, value);
    } else if (name == "sm" || name == "max_sm") {
      (name == "sm" ? settings.sm : settings.max_sm) = sm(name, value);
    } else if (name == "weight" || name == "max_weight") {
      (name == "weight" ? settings.weight : settings.max_weight) = weight(name, value);
    } else if (name == "priority" || name == "max_priority") {
      (name == "priority" ? settings.priority : settings.max_priority) = priority(name, value);
    } else if (name == "memory_total") {
      settings.memory_total = total(name, value);
    } else {
      return false;
    }
    return true;
  }

  std::string text_of(const std::string& name, const toml::node& value, const char* expected) {
    std::optional<std::string> text = as_text(value);
    if (!text) error(value.source(), name + " " + shown(value) + ": not " + expected);
    return *text;
  }

  options::Amount amount(const std::string& name, const toml::node& value) {
    options::Amount out;
    std::string reason;
    if (!options::parse_amount(text_of(name, value, "a size such as \"10G\" or \"50%\""), out,
                               reason))
      error(value.source(), name + " " + shown(value) + ": " + reason);
    return out;
  }
  // A size in bytes: a percentage of which device would a group's total be?
  uint64_t total(const std::string& name, const toml::node& value) {
    const options::Amount read = amount(name, value);
    if (read.kind == options::Amount::Kind::kPercent)
      error(value.source(),
            name + " " + shown(value) + ": a size such as \"40G\", not a percentage");
    return read.value;
  }
  uint32_t sm(const std::string& name, const toml::node& value) {
    unsigned out = 0;
    std::string reason;
    if (!options::parse_sm_percent(text_of(name, value, "a percentage from 1 to 100"), out, reason))
      error(value.source(), name + " " + shown(value) + ": " + reason);
    return out;
  }
  uint32_t weight(const std::string& name, const toml::node& value) {
    unsigned out = 0;
    std::string reason;
    if (!options::parse_weight(text_of(name, value, "a whole number"), out, reason))
      error(value.source(), name + " " + shown(value) + ": " + reason);
    return out;
  }
  protocol::Priority priority(const std::string& name, const toml::node& value) {
    options::Priority out = options::Priority::kNormal;
    std::string reason;
    const auto* text = value.as_string();
    if (!text || !options::parse_priority(text->get(), out, reason))
      error(value.source(),
            name + " " + shown(value) + ": not a priority (\"high\", \"normal\" or \"low\")");
    return protocol::to_protocol(out);
  }
  UnmanagedAction unmanaged(const toml::node& value) {
    const auto* text = value.as_string();
    if (text && text->get() == "allow") return UnmanagedAction::kAllow;
    if (text && text->get() == "warn") return UnmanagedAction::kWarn;
    if (text && text->get() == "kill") return UnmanagedAction::kKill;
    error(value.source(), "unmanaged " + shown(value) + ": not \"allow\", \"warn\" or \"kill\"");
  }

  OrphanAction orphans(const toml::node& value) {
    const auto* text = value.as_string();
    if (text && text->get() == "warn") return OrphanAction::kWarn;
    if (text && text->get() == "kill") return OrphanAction::kKill;
    error(value.source(), "orphans " + shown(value) + ": not \"warn\" or \"kill\"");
  }
  uint32_t orphan_grace(const toml::node& value) {
    return seconds("orphan_grace", value, "", kMaxOrphanGraceSeconds);
  }
  // A whole number of seconds from 0 (`zero_means` says what 0 is) to `most`.
  uint32_t seconds(const std::string& name, const toml::node& value, const char* zero_means,
                   uint32_t most) {
    const std::optional<int64_t> count = value.value_exact<int64_t>();
    if (!count || *count < 0 || *count > most)
      error(value.source(), name + " " + shown(value) + ": not a number of seconds from 0" +
                                zero_means + " to " + std::to_string(most));
    return static_cast<uint32_t>(*count);
  }

  // A maximum below the default in the same table cannot be meant.
  void check_defaults_within_maxima(const PolicySettings& settings, const toml::node& table_node) {
    const toml::table& table = *table_node.as_table();
    const auto where = [&](const char* key) { return table.get(key)->source(); };
    if (settings.memory && settings.max_memory &&
        settings.memory->kind == settings.max_memory->kind &&
        settings.memory->value > settings.max_memory->value)
      error(where("memory"), "memory " + amount_text(*settings.memory) + " is above max_memory " +
                                 amount_text(*settings.max_memory));
    if (settings.sm && settings.max_sm && *settings.sm > *settings.max_sm)
      error(where("sm"), "sm " + std::to_string(*settings.sm) + " is above max_sm " +
                             std::to_string(*settings.max_sm));
    if (settings.weight && settings.max_weight && *settings.weight > *settings.max_weight)
      error(where("weight"), "weight " + std::to_string(*settings.weight) +
                                 " is above max_weight " + std::to_string(*settings.max_weight));
    if (settings.priority && settings.max_priority &&
        static_cast<int>(*settings.priority) > static_cast<int>(*settings.max_priority))
      error(where("priority"), "priority is above max_priority");
  }

  // A device: "GPU-..." or its NVML index. An index past the machine's
  // GPUs names nothing (a warning): nullopt then.
  std::optional<GpuUuid> device_key(const toml::source_region& where, const std::string& name) {
    GpuUuid uuid{};
    if (name.starts_with("GPU-")) {
      if (!parse_gpu_uuid(name, uuid))
        error(where, "device \"" + name +
                         "\" is not a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)");
      return uuid;
    }
    if (!options::all_digits(name) || name.size() > 4)
      error(where, "device \"" + name + "\" is neither a GPU UUID (GPU-...) nor a device index");
    const std::size_t index = std::stoul(name);
    const std::vector<GpuUuid>& gpus = machine_gpus(where, name);
    if (index >= gpus.size()) {
      warn(where, "device " + name + ": the machine has " + std::to_string(gpus.size()) +
                      " GPUs; this names none of them");
      return std::nullopt;
    }
    return gpus[index];
  }

  std::vector<GpuUuid> device_list(const toml::node& value) {
    const toml::array* list = value.as_array();
    if (!list) error(value.source(), "devices must be a list of GPU UUIDs or device indices");
    std::vector<GpuUuid> uuids;
    for (const toml::node& item : *list) {
      std::string name;
      if (const auto* text = item.as_string()) {
        name = text->get();
        if (!name.starts_with("GPU-"))
          error(item.source(), "device \"" + name + "\" is not a GPU UUID (GPU-...)");
      } else if (const auto* number = item.as_integer(); number && number->get() >= 0) {
        name = std::to_string(number->get());
      } else {
        error(item.source(),
              "devices: " + shown(item) + " is neither a GPU UUID nor a device index");
      }
      if (const std::optional<GpuUuid> uuid = device_key(item.source(), name))
        uuids.push_back(*uuid);
    }
    return uuids;
  }

  const std::vector<GpuUuid>& machine_gpus(const toml::source_region& where,
                                           const std::string& index) {
    if (!gpus_) {
      Result<std::vector<GpuUuid>> listed = lookups_.gpus();
      if (!listed)
        error(where, "device " + index + " is named by its index, but the GPUs cannot be listed (" +
                         listed.error() + "); name it by its UUID");
      gpus_ = std::move(*listed);
    }
    return *gpus_;
  }

  const std::string& path_;
  const PolicyLookups& lookups_;
  struct Warning {
    uint32_t line = 0;
    uint32_t column = 0;
    std::string text;
  };
  std::vector<Warning> warnings_;
  std::optional<std::vector<GpuUuid>> gpus_;
};

}  // namespace

PolicyLookups system_lookups() {
  PolicyLookups lookups;
  lookups.user_id = [](const std::string& name) -> std::optional<uid_t> {
    std::vector<char> buffer(16384);
    passwd entry{};
    passwd* found = nullptr;
    if (getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || !found)
      return std::nullopt;
    return found->pw_uid;
  };
  lookups.group_id = [](const std::string& name) -> std::optional<gid_t> {
    std::vector<char> buffer(65536);
    group entry{};
    group* found = nullptr;
    if (getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || !found)
      return std::nullopt;
    return found->gr_gid;
  };
  lookups.uid_known = [](uid_t uid) {
    std::vector<char> buffer(16384);
    passwd entry{};
    passwd* found = nullptr;
    return getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found;
  };
  lookups.gid_known = [](gid_t gid) {
    std::vector<char> buffer(65536);
    group entry{};
    group* found = nullptr;
    return getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &found) == 0 && found;
  };
  lookups.gpus = nvml_gpu_uuids;
  return lookups;
}

Result<LoadedPolicy> parse_policy(std::string_view text, const std::string& path,
                                  const PolicyLookups& lookups) {
  try {
    const toml::table root = toml::parse(text, path);
    return PolicyReader(path, lookups).read(root);
  } catch (const toml::parse_error& bad) {
    return fail(one_line(position(path, bad.source()) + ": " + std::string(bad.description())));
  } catch (const PolicyError& bad) {
    return fail(one_line(bad.message));
  } catch (const std::exception& bad) {
    return fail(one_line(path + ": " + bad.what()));
  }
}

Result<LoadedPolicy> load_policy_file(const std::string& path, const PolicyLookups& lookups) {
  // Read on the event loop: a FIFO (whose open would wait for a writer) or
  // a huge file must not stall it.
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0)
    return fail("cannot read the policy file " + path + ": " + std::strerror(errno));
  if (!S_ISREG(status.st_mode)) return fail("the policy file " + path + " is not a regular file");
  if (status.st_size > kMaxPolicyFileBytes)
    return fail("the policy file " + path + " is larger than " + format_size(kMaxPolicyFileBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot read the policy file " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return fail("cannot read the policy file " + path);
  return parse_policy(text.str(), path, lookups);
}

Result<LoadedPolicy> load_server_policy(const std::string& path, bool optional,
                                        const PolicyLookups& lookups) {
  if (path.empty()) return LoadedPolicy{};
  struct stat status {};
  if (optional && ::stat(path.c_str(), &status) != 0 && errno == ENOENT) return LoadedPolicy{};
  return load_policy_file(path, lookups);
}

}  // namespace gpulimit::server
