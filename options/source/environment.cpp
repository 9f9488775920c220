#include "gpulimit/options/environment.h"

#include <bitset>
#include <utility>

#include "gpulimit/options/values.h"
#include "no_throw.h"

namespace gpulimit::options {
namespace {

// Where a value came from, to name it in an error: "GPULIMIT_MEM=10Q" for a
// variable, "--mem 10Q" for a flag.
struct Source {
  std::string_view name;
  std::string_view text;
  bool is_flag = false;

  std::string describe() const {
    std::string result(name);
    result += is_flag ? ' ' : '=';
    result += text.empty() && is_flag ? "''" : text;
    return result;
  }
};

constexpr std::size_t row(OptionId id) {
  return static_cast<std::size_t>(id);
}

// The value of `name`: the first assignment in the block, as getenv finds
// it. Empty counts as unset, as a container spec or `NAME= cmd` clears it.
std::optional<std::string_view> variable_value(char* const* envp, std::string_view name) {
  if (!envp) return std::nullopt;
  for (char* const* entry = envp; *entry; ++entry) {
    const std::string_view assignment(*entry);
    if (assignment.size() <= name.size() || !assignment.starts_with(name) ||
        assignment[name.size()] != '=') {
      continue;
    }
    const std::string_view value = assignment.substr(name.size() + 1);
    if (value.empty()) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

std::optional<Source> source_of(const OptionSpec& spec, char* const* envp,
                                const FlagValues* flags) {
  if (flags && !spec.flag.empty()) {
    if (const std::optional<std::string_view>& given = (*flags)[row(spec.id)])
      return Source{spec.flag, *given, true};
  }
  if (const std::optional<std::string_view> value = variable_value(envp, spec.variable))
    return Source{spec.variable, *value, false};
  return std::nullopt;
}

// CUDA_DEVICE_MEMORY_LIMIT: the cap on every device, as HAMi sets it.
bool merge_mem_alias(char* const* envp, const std::optional<Source>& primary, Limits& limits,
                     std::string& error) {
  const std::string_view name = option(OptionId::kMem).hami_alias;
  const std::optional<std::string_view> text = variable_value(envp, name);
  if (!text) return true;
  const Source alias{name, *text};
  Amount amount;
  std::string reason;
  if (!parse_amount(*text, amount, reason)) {
    error = alias.describe() + ": " + reason;
    return false;
  }
  if (primary && limits.memory.all != amount) {
    error = primary->describe() + " and " + alias.describe() + " disagree";
    return false;
  }
  limits.memory.all = amount;
  return true;
}

// CUDA_DEVICE_MEMORY_LIMIT_<i>: the cap on device i, as HAMi sets it. Any
// variable with the prefix is taken for one: a misspelt index must not
// quietly leave a device without its cap.
bool merge_device_mem_aliases(char* const* envp, const std::optional<Source>& primary,
                              Limits& limits, std::string& error) {
  if (!envp) return true;
  const std::string_view prefix = option(OptionId::kDeviceMem).hami_alias;
  std::bitset<kMaxDeviceIndex + 1> seen;
  for (char* const* entry = envp; *entry; ++entry) {
    const std::string_view assignment(*entry);
    const std::size_t equals = assignment.find('=');
    if (!assignment.starts_with(prefix) || equals == std::string_view::npos) continue;
    const Source alias{assignment.substr(0, equals), assignment.substr(equals + 1)};
    const std::string_view index_text = alias.name.substr(prefix.size());
    unsigned index = 0;
    if (!parse_device_index(index_text, index)) {
      error = alias.describe() + ": '" + std::string(index_text) +
              "' is not a device index (0 to " + std::to_string(kMaxDeviceIndex) + ")";
      return false;
    }
    // A name given twice: the first counts, as with getenv.
    if (seen.test(index)) continue;
    seen.set(index);
    if (alias.text.empty()) continue;
    Amount amount;
    std::string reason;
    if (!parse_amount(alias.text, amount, reason)) {
      error = alias.describe() + ": " + reason;
      return false;
    }
    // Only the primary's entries can be there yet: each alias index is seen once.
    const auto given = limits.memory.by_device.find(index);
    if (given != limits.memory.by_device.end() && given->second != amount) {
      error = primary->describe() + " and " + alias.describe() + " disagree on device " +
              std::to_string(index);
      return false;
    }
    limits.memory.by_device[index] = amount;
  }
  return true;
}

// CUDA_DEVICE_SM_LIMIT: the cap of GPU time, as HAMi sets it. HAMi writes 0
// for a pod without one: that sets nothing, and so disagrees with nothing.
bool merge_sm_alias(char* const* envp, const std::optional<Source>& primary, Limits& limits,
                    std::string& error) {
  const std::string_view name = option(OptionId::kSm).hami_alias;
  const std::optional<std::string_view> text = variable_value(envp, name);
  if (!text) return true;
  const Source alias{name, *text};
  unsigned percent = 0;
  std::string reason;
  if (!parse_hami_sm_limit(*text, percent, reason)) {
    error = alias.describe() + ": " + reason;
    return false;
  }
  if (percent == 0) return true;
  if (primary && limits.compute.sm_percent != percent) {
    error = primary->describe() + " and " + alias.describe() + " disagree";
    return false;
  }
  limits.compute.sm_percent = percent;
  return true;
}

bool read_limits(char* const* envp, const FlagValues* flags, Limits& out, std::string& error) {
  Limits limits;
  std::array<std::optional<Source>, kOptionCount> sources;
  for (const OptionSpec& spec : kOptionTable) {
    const std::optional<Source>& source = sources[row(spec.id)] = source_of(spec, envp, flags);
    if (!source) continue;
    std::string reason;
    if (!parse_option_value(spec.id, source->text, limits, reason)) {
      error = source->describe() + ": " + reason;
      return false;
    }
  }
  if (!merge_mem_alias(envp, sources[row(OptionId::kMem)], limits, error)) return false;
  if (!merge_device_mem_aliases(envp, sources[row(OptionId::kDeviceMem)], limits, error))
    return false;
  if (!merge_sm_alias(envp, sources[row(OptionId::kSm)], limits, error)) return false;
  out = std::move(limits);
  return true;
}

constexpr OptionId kComputeOptions[] = {OptionId::kSm, OptionId::kWeight, OptionId::kPriority};

bool find_compute_source(char* const* envp, const FlagValues& flags, std::string& source) {
  for (const OptionId id : kComputeOptions) {
    if (const std::optional<Source> given = source_of(option(id), envp, &flags)) {
      source = given->describe();
      return true;
    }
  }
  const std::string_view alias = option(OptionId::kSm).hami_alias;
  if (const std::optional<std::string_view> text = variable_value(envp, alias)) {
    unsigned percent = 0;
    std::string reason;
    // HAMi's "no cap" asks for nothing; a malformed value is refused by
    // read_limits, and counts here as asking.
    if (parse_hami_sm_limit(*text, percent, reason) && percent == 0) return false;
    source = Source{alias, *text}.describe();
    return true;
  }
  return false;
}

}  // namespace

bool parse_option_value(OptionId id, std::string_view text, Limits& limits,
                        std::string& reason) noexcept {
  return detail::without_exceptions(reason, [&]() -> bool {
    switch (id) {
      case OptionId::kMem: {
        Amount amount;
        if (!parse_amount(text, amount, reason)) return false;
        limits.memory.all = amount;
        return true;
      }
      case OptionId::kDeviceMem:
        return parse_device_amounts(text, limits.memory, reason);
      case OptionId::kSm:
        return parse_sm_percent(text, limits.compute.sm_percent, reason);
      case OptionId::kWeight:
        return parse_weight(text, limits.compute.weight, reason);
      case OptionId::kPriority:
        return parse_priority(text, limits.compute.priority, reason);
      case OptionId::kTenant:
        if (!parse_tenant_id(text, reason)) return false;
        limits.tenant = text;
        return true;
      case OptionId::kLedgerDir:
        if (!parse_absolute_path(text, reason)) return false;
        limits.ledger_dir = text;
        return true;
      case OptionId::kSocket:
        if (!parse_socket_path(text, reason)) return false;
        limits.socket = text;
        return true;
    }
    reason = "unknown option";
    return false;
  });
}

bool limits_from_environment(char* const* envp, Limits& out, std::string& error) noexcept {
  return detail::without_exceptions(error, [&] { return read_limits(envp, nullptr, out, error); });
}

bool limits_from_command_line(char* const* envp, const FlagValues& flags, Limits& out,
                              std::string& error) noexcept {
  return detail::without_exceptions(error, [&] { return read_limits(envp, &flags, out, error); });
}

bool compute_limits_asked(char* const* envp, const FlagValues& flags,
                          std::string& source) noexcept {
  std::string error;
  return detail::without_exceptions(error,
                                    [&] { return find_compute_source(envp, flags, source); });
}

}  // namespace gpulimit::options
