#include "plugin_settings.h"

#include <array>
#include <string_view>

#include "gpulimit/options/environment.h"
#include "gpulimit/options/option_table.h"
#include "gpulimit/options/values.h"
#include "gpulimit/protocol/channel.h"
#include "step_limits.h"

namespace gpulimit::slurm {
namespace {

using options::OptionId;

enum class Argument {
  kLibrary,
  kSocket,
  kLedgerDir,
  kDefaultMem,
  kDefaultSm,
  kDefaultWeight,
  kDefaultPriority,
  kMaxMem,
  kMaxSm,
  kMaxWeight,
  kMaxPriority,
  kShardsPerGpu,
};

struct ArgumentSpec {
  std::string_view name;
  Argument argument;
};

constexpr std::array kArguments = {
    ArgumentSpec{"library", Argument::kLibrary},
    ArgumentSpec{"socket", Argument::kSocket},
    ArgumentSpec{"ledger_dir", Argument::kLedgerDir},
    ArgumentSpec{"default_mem", Argument::kDefaultMem},
    ArgumentSpec{"default_sm", Argument::kDefaultSm},
    ArgumentSpec{"default_weight", Argument::kDefaultWeight},
    ArgumentSpec{"default_priority", Argument::kDefaultPriority},
    ArgumentSpec{"max_mem", Argument::kMaxMem},
    ArgumentSpec{"max_sm", Argument::kMaxSm},
    ArgumentSpec{"max_weight", Argument::kMaxWeight},
    ArgumentSpec{"max_priority", Argument::kMaxPriority},
    ArgumentSpec{"shards_per_gpu", Argument::kShardsPerGpu},
};

std::string known_names() {
  std::string names;
  for (const ArgumentSpec& spec : kArguments) {
    if (!names.empty()) names += ", ";
    names += spec.name;
  }
  return names;
}

// A whole number from 1 up, for shards_per_gpu.
bool parse_count(std::string_view text, unsigned& out, std::string& reason) {
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || value > 100000) {
      reason = "not a whole number from 1 to 100000";
      return false;
    }
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (text.empty() || value == 0 || value > 100000) {
    reason = "not a whole number from 1 to 100000";
    return false;
  }
  out = value;
  return true;
}

// Parses `text` for `argument` into `settings`, using the gpulimit option's
// own parser for the limits, into a scratch Limits for the maxima.
bool apply(Argument argument, std::string_view text, PluginSettings& settings,
           std::string& reason) {
  options::Limits scratch;
  switch (argument) {
    case Argument::kLibrary:
      if (!options::parse_absolute_path(text, reason)) return false;
      settings.library = text;
      return true;
    case Argument::kSocket:
      if (!options::parse_socket_path(text, reason)) return false;
      settings.socket = text;
      return true;
    case Argument::kLedgerDir:
      if (!options::parse_absolute_path(text, reason)) return false;
      settings.ledger_dir = text;
      return true;
    case Argument::kDefaultMem:
      return options::parse_option_value(OptionId::kMem, text, settings.defaults, reason);
    case Argument::kDefaultSm:
      return options::parse_option_value(OptionId::kSm, text, settings.defaults, reason);
    case Argument::kDefaultWeight:
      return options::parse_option_value(OptionId::kWeight, text, settings.defaults, reason);
    case Argument::kDefaultPriority:
      return options::parse_option_value(OptionId::kPriority, text, settings.defaults, reason);
    case Argument::kMaxMem:
      if (!options::parse_option_value(OptionId::kMem, text, scratch, reason)) return false;
      settings.max_mem = scratch.memory.all;
      return true;
    case Argument::kMaxSm:
      if (!options::parse_option_value(OptionId::kSm, text, scratch, reason)) return false;
      settings.max_sm = scratch.compute.sm_percent;
      return true;
    case Argument::kMaxWeight:
      if (!options::parse_option_value(OptionId::kWeight, text, scratch, reason)) return false;
      settings.max_weight = scratch.compute.weight;
      return true;
    case Argument::kMaxPriority:
      if (!options::parse_option_value(OptionId::kPriority, text, scratch, reason)) return false;
      settings.max_priority = scratch.compute.priority;
      return true;
    case Argument::kShardsPerGpu:
      return parse_count(text, settings.shards_per_gpu, reason);
  }
  reason = "unknown argument";
  return false;
}

// A default the maxima refuse would refuse every step that takes it.
bool check_defaults(const PluginSettings& settings, std::string& error) {
  const options::Limits& defaults = settings.defaults;
  std::string reason;
  if (defaults.memory.all && settings.max_mem &&
      !amount_within(*defaults.memory.all, *settings.max_mem, reason)) {
    error = "default_mem: " + reason;
    return false;
  }
  if (settings.max_sm != 0 && defaults.compute.sm_percent > settings.max_sm) {
    error = "default_sm " + std::to_string(defaults.compute.sm_percent) + " is above max_sm " +
            std::to_string(settings.max_sm);
    return false;
  }
  if (defaults.compute.weight > settings.max_weight) {
    error = "default_weight " + std::to_string(defaults.compute.weight) + " is above max_weight " +
            std::to_string(settings.max_weight);
    return false;
  }
  if (defaults.compute.priority > settings.max_priority) {
    error = "default_priority " + std::string(options::priority_name(defaults.compute.priority)) +
            " is above max_priority " + std::string(options::priority_name(settings.max_priority));
    return false;
  }
  return true;
}

}  // namespace

bool PluginSettings::limits_every_step() const noexcept {
  return !defaults.memory.empty() || defaults.compute != options::ComputeLimits{} || max_mem ||
         max_sm != 0 || max_weight != options::kMaxWeight ||
         max_priority != options::Priority::kHigh;
}

bool parse_plugin_arguments(int argc, const char* const* argv, PluginSettings& out,
                            std::string& error) {
  PluginSettings settings;
  settings.socket = protocol::kSystemSocketPath;
  settings.ledger_dir = options::kDefaultLedgerDir;
  for (int i = 0; i < argc; ++i) {
    const std::string_view word(argv[i] ? argv[i] : "");
    const std::size_t equals = word.find('=');
    const std::string_view name = word.substr(0, equals);
    const ArgumentSpec* spec = nullptr;
    for (const ArgumentSpec& candidate : kArguments)
      if (candidate.name == name) spec = &candidate;
    if (!spec || equals == std::string_view::npos) {
      error = "'" + std::string(word) + "' is not NAME=VALUE with NAME one of " + known_names();
      return false;
    }
    std::string reason;
    if (!apply(spec->argument, word.substr(equals + 1), settings, reason)) {
      error = std::string(word) + ": " + reason;
      return false;
    }
  }
  if (settings.library.empty()) {
    error = "library=PATH (the absolute path of libgpulimit.so) is missing";
    return false;
  }
  if (!check_defaults(settings, error)) return false;
  out = std::move(settings);
  return true;
}

}  // namespace gpulimit::slurm
