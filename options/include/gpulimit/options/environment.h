// Limits to and from a process's environment: what libgpulimit.so reads at
// attach, and what the CLI checks and writes before it starts a job.
//
// Variables (kOptionTable): GPULIMIT_MEM, GPULIMIT_DEVICE_MEM, GPULIMIT_SM,
// GPULIMIT_WEIGHT, GPULIMIT_PRIORITY, GPULIMIT_TENANT, GPULIMIT_LEDGER_DIR,
// GPULIMIT_SOCKET, and HAMi's CUDA_DEVICE_MEMORY_LIMIT (= GPULIMIT_MEM),
// CUDA_DEVICE_MEMORY_LIMIT_<i> (= device i of GPULIMIT_DEVICE_MEM) and
// CUDA_DEVICE_SM_LIMIT (= GPULIMIT_SM, where 0 means no cap). A variable set
// to the empty string counts as unset. Where a name appears twice in the
// block, the first counts, as with getenv.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/options/limits.h"
#include "gpulimit/options/option_table.h"

namespace gpulimit::options {

// NAME, of an environment entry NAME=value (all of it when it has no '=').
constexpr std::string_view variable_name(std::string_view assignment) {
  return assignment.substr(0, assignment.find('='));
}

// Reads `envp`, a NULL-terminated NAME=value block such as environ (NULL
// reads as empty), rather than calling getenv: the caller says which
// environment counts, and tests pass their own.
// On failure returns false with `out` untouched and `error` set to one line
// naming the variable and its value:
//   GPULIMIT_MEM=10Q: not a size (examples: 10G, 512M, 50%)
// A gpulimit variable and its HAMi alias that disagree are an error naming
// both.
bool limits_from_environment(char* const* envp, Limits& out, std::string& error) noexcept;

// Parses `text` as the value of option `id`, with the parser its row names,
// into its place in `limits`; the rest of `limits` stays. False with
// `reason` set to what is wrong with the text, without naming where it came
// from ("not a size (examples: 10G, 512M, 50%)"): for a caller with its own
// name for the option, such as a batch system's --gpu-mem.
bool parse_option_value(OptionId id, std::string_view text, Limits& limits,
                        std::string& reason) noexcept;

// Flag values the CLI was given, by OptionId; nullopt for a flag not given.
// Rows without a flag take none: their entries are ignored.
using FlagValues = std::array<std::optional<std::string_view>, kOptionCount>;

// The limits a job started with `flags` in environment `envp` runs under: a
// flag replaces its variable, the rest of the environment stays as it is.
// The checks are those of limits_from_environment, and errors name the flag
// where a flag gave the value: "--mem 0: zero is not a cap".
bool limits_from_command_line(char* const* envp, const FlagValues& flags, Limits& out,
                              std::string& error) noexcept;

// Whether `flags` or `envp` ask for a limit of GPU time (--sm, --weight,
// --priority, their variables, or a CUDA_DEVICE_SM_LIMIT other than 0), which
// only gpulimitd can enforce. Given ones count even when equal to the
// default (--weight 1). True with `source` naming the first, as errors name
// it: "--sm 30", "GPULIMIT_WEIGHT=2". False also when memory runs out.
bool compute_limits_asked(char* const* envp, const FlagValues& flags, std::string& source) noexcept;

// `limits` as NAME=value assignments of the gpulimit variables, in table
// order and normalised (10240M is written 10G): those that differ from the
// default. limits_from_environment reads them back to `limits`.
bool limits_to_environment(const Limits& limits, std::vector<std::string>& out) noexcept;

}  // namespace gpulimit::options
