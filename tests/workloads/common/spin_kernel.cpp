#include "spin_kernel.h"

#include "cu_check.h"

namespace workloads {

// kernels/spin.cu compiled to PTX at build time; see CMakeLists.txt.
extern const char kSpinPtx[];

SpinKernel::~SpinKernel() {
  if (module_) CU(cuModuleUnload)(module_);
}

CUresult SpinKernel::load() {
  CU_CHECK(cuModuleLoadData(&module_, kSpinPtx));
  CU_CHECK(cuModuleGetFunction(&function_, module_, "spin"));
  return CUDA_SUCCESS;
}

}  // namespace workloads
