#include "step_limits.h"

#include <algorithm>

#include "gpulimit/options/environment.h"
#include "gpulimit/options/values.h"

namespace gpulimit::slurm {
namespace {

using options::Amount;
using options::OptionId;

std::string describe(const Amount& amount) {
  if (amount.kind == Amount::Kind::kPercent) return std::to_string(amount.value) + "%";
  // As a person wrote it: the largest binary unit that divides the bytes.
  constexpr std::array<std::pair<unsigned, char>, 4> kUnits = {
      {{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}}};
  for (const auto& [shift, suffix] : kUnits) {
    if (amount.value % (uint64_t{1} << shift) == 0)
      return std::to_string(amount.value >> shift) + suffix;
  }
  return std::to_string(amount.value);
}

// The maxima, for a value the parser accepted into `asked`.
bool within_maxima(OptionId id, const options::Limits& asked, const PluginSettings& settings,
                   std::string& reason) {
  switch (id) {
    case OptionId::kMem:
      return !settings.max_mem || amount_within(*asked.memory.all, *settings.max_mem, reason);
    case OptionId::kSm:
      if (settings.max_sm != 0 && asked.compute.sm_percent > settings.max_sm) {
        reason = "above this cluster's maximum of " + std::to_string(settings.max_sm) + "%";
        return false;
      }
      return true;
    case OptionId::kWeight:
      if (asked.compute.weight > settings.max_weight) {
        reason = "above this cluster's maximum of " + std::to_string(settings.max_weight);
        return false;
      }
      return true;
    case OptionId::kPriority:
      if (asked.compute.priority > settings.max_priority) {
        reason = "above this cluster's maximum of " +
                 std::string(options::priority_name(settings.max_priority));
        return false;
      }
      return true;
    default:
      return true;
  }
}

}  // namespace

bool amount_within(const Amount& asked, const Amount& maximum, std::string& reason) {
  if (asked.kind != maximum.kind) {
    reason = "this cluster allows at most " + describe(maximum) + "; give " +
             (maximum.kind == Amount::Kind::kPercent ? "a percentage" : "a size") +
             " of at most that";
    return false;
  }
  if (asked.value > maximum.value) {
    reason = "above this cluster's maximum of " + describe(maximum);
    return false;
  }
  return true;
}

bool check_step_option(std::size_t row, std::string_view text, const PluginSettings& settings,
                       std::string& error) {
  const StepOption& option = kStepOptions.at(row);
  options::Limits asked;
  std::string reason;
  if (!options::parse_option_value(option.id, text, asked, reason) ||
      !within_maxima(option.id, asked, settings, reason)) {
    error = "--" + std::string(option.name) + "=" + std::string(text) + ": " + reason;
    return false;
  }
  return true;
}

std::optional<unsigned> parse_shard_count(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  return value;
}

std::optional<unsigned> shard_percent(std::optional<unsigned> step_shards,
                                      unsigned shards_per_gpu) {
  if (!step_shards || *step_shards == 0 || shards_per_gpu == 0) return std::nullopt;
  // Rounded down, as a cap must not grant more than the shards hold; never
  // below 1 %, the smallest share there is.
  const uint64_t percent = uint64_t{*step_shards} * 100 / shards_per_gpu;
  return static_cast<unsigned>(std::clamp<uint64_t>(percent, 1, 100));
}

bool step_is_limited(const PluginSettings& settings, const StepRequest& request,
                     std::optional<unsigned> shard_share) {
  const bool asked = std::any_of(request.begin(), request.end(),
                                 [](const std::optional<std::string>& text) { return text; });
  return asked || shard_share || settings.limits_every_step();
}

bool step_limits(const PluginSettings& settings, const StepRequest& request,
                 std::optional<unsigned> shard_share, options::Limits& out, std::string& error) {
  options::Limits limits = settings.defaults;
  if (shard_share) {
    unsigned percent = *shard_share;
    if (settings.max_mem && settings.max_mem->kind == Amount::Kind::kPercent)
      percent = std::min(percent, static_cast<unsigned>(settings.max_mem->value));
    limits.memory.all = Amount{Amount::Kind::kPercent, percent};
    limits.compute.weight = std::min(*shard_share, settings.max_weight);
  }
  for (std::size_t row = 0; row < kStepOptionCount; ++row) {
    if (!request[row]) continue;
    if (!check_step_option(row, *request[row], settings, error)) return false;
    std::string reason;
    options::parse_option_value(kStepOptions[row].id, *request[row], limits, reason);
  }
  // A maximum is a cap for the step that names none.
  if (!limits.memory.all && settings.max_mem) limits.memory.all = settings.max_mem;
  if (limits.compute.sm_percent == 0) limits.compute.sm_percent = settings.max_sm;
  // A shard share in percent under a maximum in bytes: only the GPU's size
  // could compare them, and the step does not know it. The shard share
  // stands; gpulimitd's policy is the place for a byte limit on it.
  limits.socket = settings.socket;
  limits.ledger_dir = settings.ledger_dir;
  limits.tenant.clear();
  out = std::move(limits);
  return true;
}

}  // namespace gpulimit::slurm
