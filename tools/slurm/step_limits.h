// The limits one job step runs under: what its user asked for with
// --gpu-mem, --gpu-sm, --gpu-weight and --gpu-priority, else its share of
// the GPU's shards, else the plugin's defaults; never above the plugin's
// maxima. (gpulimitd may lower them further by its policy.)
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "gpulimit/options/limits.h"
#include "plugin_settings.h"
#include "step_options.h"

namespace gpulimit::slurm {

// The text the user gave each option, by kStepOptions row; nullopt: not given.
using StepRequest = std::array<std::optional<std::string>, kStepOptionCount>;

// Whether `asked` is at most `maximum`. A size and a percentage cannot be
// compared before the GPU is known: false then too, with `reason` saying
// what to give instead.
bool amount_within(const options::Amount& asked, const options::Amount& maximum,
                   std::string& reason);

// Checks the value of option `row` as srun, sbatch or salloc receive it:
// the gpulimit option's parser, then the maxima. False with `error` set to
// one line naming the option: "--gpu-mem=banana: not a size (examples: 10G,
// 512M, 50%)".
bool check_step_option(std::size_t row, std::string_view text, const PluginSettings& settings,
                       std::string& error);

// The step's share of one GPU in percent (1 to 100), from the shards it
// holds on this node and the shards of one GPU; nullopt when either is
// unknown or zero.
std::optional<unsigned> shard_percent(std::optional<unsigned> step_shards, unsigned shards_per_gpu);

// SLURM_SHARDS_ON_NODE as Slurm writes it: a whole number; nullopt for
// anything else.
std::optional<unsigned> parse_shard_count(std::string_view text);

// Whether the step runs under gpulimit at all: it asked for a limit, holds
// shards the plugin can turn into a share, or the plugin limits every step.
bool step_is_limited(const PluginSettings& settings, const StepRequest& request,
                     std::optional<unsigned> shard_share);

// The step's limits (memory and GPU time; socket and ledger directory from
// `settings`; tenant left empty). `shard_share` from shard_percent() sets
// the default memory (that percentage of each GPU) and weight (the
// percentage itself), ahead of the plugin's defaults. False with `error`
// set as check_step_option sets it.
bool step_limits(const PluginSettings& settings, const StepRequest& request,
                 std::optional<unsigned> shard_share, options::Limits& out, std::string& error);

}  // namespace gpulimit::slurm
