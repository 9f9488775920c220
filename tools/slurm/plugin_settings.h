// What the administrator gives the plugin on its plugstack.conf line:
//
//   required /usr/lib/gpulimit/gpulimit_spank.so library=/usr/lib/libgpulimit.so
//       socket=/run/gpulimit/gpulimitd.sock default_mem=8G max_mem=40G
//
// (one line in the file).
//
// Every value is checked with the parser of the gpulimit option it stands
// for, so default_mem=10G means what `gpulimit --mem 10G` means.
#pragma once

#include <optional>
#include <string>

#include "gpulimit/options/limits.h"

namespace gpulimit::slurm {

struct PluginSettings {
  // Limits of a step that asks for none (default_mem, default_sm,
  // default_weight, default_priority). Memory empty and sm_percent 0: none.
  options::Limits defaults;
  // The most a step may ask for (max_mem, max_sm, max_weight, max_priority).
  std::optional<options::Amount> max_mem;
  unsigned max_sm = 0;  // 0: no maximum
  unsigned max_weight = options::kMaxWeight;
  options::Priority max_priority = options::Priority::kHigh;
  // Shards of one GPU on this node, as gres.conf gives them (shards_per_gpu):
  // Slurm tells a step how many shards it holds, never how many there are.
  unsigned shards_per_gpu = 0;  // 0: not given; shards then set no defaults
  std::string library;          // libgpulimit.so, absolute
  std::string socket;           // the node's system gpulimitd
  std::string ledger_dir;

  // Whether a step that asks for nothing still runs under gpulimit: some
  // default or maximum applies to it.
  bool limits_every_step() const noexcept;
};

// Reads the plugin's arguments (NAME=VALUE words). False with `error` set
// to one line naming the argument ("max_mem=lots: not a size (examples:
// ...)"), for an unknown name, a bad value, a default above its maximum, or
// a missing library=.
bool parse_plugin_arguments(int argc, const char* const* argv, PluginSettings& out,
                            std::string& error);

}  // namespace gpulimit::slurm
