// cuInit: the first call of every CUDA program, and where a process joins its
// tenant. A limit that cannot be read refuses CUDA: the job never runs
// unlimited by mistake.
#include "real_driver.h"
#include "tenant.h"

GPULIMIT_EXPORT CUresult cuInit(unsigned int flags) {
  using gpulimit::Tenant;
  if (CUresult refused = Tenant::attach(Tenant::Phase::kBeforeInit); refused != CUDA_SUCCESS)
    return refused;
  auto real = gpulimit::real_function(gpulimit::real::cuInit);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(flags);
  if (result != CUDA_SUCCESS) return result;
  return Tenant::attach(Tenant::Phase::kAfterInit);
}
