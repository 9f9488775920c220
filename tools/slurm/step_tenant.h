// The tenant a job step is: every task of the step, on this node, shares one
// memory cap and one share of GPU time.
#pragma once

#include <cstdint>
#include <string>

namespace gpulimit::slurm {

// Slurm's step ids of the steps that have no number (slurm.h).
inline constexpr uint32_t kBatchStep = 0xfffffffb;        // SLURM_BATCH_SCRIPT
inline constexpr uint32_t kExternStep = 0xfffffffc;       // SLURM_EXTERN_CONT
inline constexpr uint32_t kInteractiveStep = 0xfffffffa;  // SLURM_INTERACTIVE_STEP

// "slurm-<job>.<step>", with "batch", "extern" or "interactive" for the
// steps Slurm names so: unique on the node while the job runs, a valid
// tenant id, and what `gpulimit status` shows, so an administrator can tell
// the step from the tenant at a glance.
std::string step_tenant_id(uint32_t job_id, uint32_t step_id);

}  // namespace gpulimit::slurm
