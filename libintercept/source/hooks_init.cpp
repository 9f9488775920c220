// cuInit: the first call of every CUDA program, and where a process joins its
// tenant. A limit that cannot be read refuses CUDA: the job never runs
// unlimited by mistake. Then, with a server configured, the process attaches
// to it for time-slicing (a server that cannot be reached or refuses leaves
// launches ungated, never CUDA refused).
#include "gate/launch_gate.h"
#include "lookup/real_driver.h"
#include "memory/tenant.h"

GPULIMIT_EXPORT CUresult cuInit(unsigned int flags) {
  using gpulimit::Tenant;
  // No driver (or a namespace where gpulimit refuses it): nothing to join.
  if (!gpulimit::load_driver()) return CUDA_ERROR_NOT_INITIALIZED;
  if (CUresult refused = Tenant::attach(Tenant::Phase::kBeforeInit); refused != CUDA_SUCCESS)
    return refused;
  auto real = gpulimit::real_function(gpulimit::real::cuInit);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(flags);
  if (result != CUDA_SUCCESS) return result;
  if (CUresult refused = Tenant::attach(Tenant::Phase::kAfterInit); refused != CUDA_SUCCESS)
    return refused;
  gpulimit::gate::attach_after_init();
  return CUDA_SUCCESS;
}
