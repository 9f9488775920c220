// The options the plugin adds to srun, sbatch and salloc, one row each: a
// gpulimit option under a name that cannot clash with Slurm's own (--mem is
// Slurm's host memory). Each value is parsed by the row of kOptionTable it
// names, exactly as `gpulimit --mem` parses it.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "gpulimit/options/option_table.h"

namespace gpulimit::slurm {

struct StepOption {
  std::string_view name;  // without "--"
  options::OptionId id;
  std::string_view usage;  // one line for `srun --help`
};

inline constexpr std::array kStepOptions = {
    StepOption{"gpu-mem", options::OptionId::kMem,
               "GPU memory cap of the job step on every GPU it uses (gpulimit --mem)"},
    StepOption{"gpu-sm", options::OptionId::kSm,
               "Hard cap of the step's GPU time, a percentage (gpulimit --sm)"},
    StepOption{"gpu-weight", options::OptionId::kWeight,
               "Share of GPU time under contention (gpulimit --weight)"},
    StepOption{"gpu-priority", options::OptionId::kPriority,
               "high, normal or low (gpulimit --priority)"},
};

inline constexpr std::size_t kStepOptionCount = kStepOptions.size();

}  // namespace gpulimit::slurm
