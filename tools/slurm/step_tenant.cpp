#include "step_tenant.h"

namespace gpulimit::slurm {

std::string step_tenant_id(uint32_t job_id, uint32_t step_id) {
  std::string step;
  switch (step_id) {
    case kBatchStep:
      step = "batch";
      break;
    case kExternStep:
      step = "extern";
      break;
    case kInteractiveStep:
      step = "interactive";
      break;
    default:
      step = std::to_string(step_id);
      break;
  }
  return "slurm-" + std::to_string(job_id) + "." + step;
}

}  // namespace gpulimit::slurm
