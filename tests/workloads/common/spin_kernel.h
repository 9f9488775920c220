// The spin kernel of kernels/spin.cu, loaded from the PTX built into this
// program (the driver compiles it for the device at load time).
#pragma once

#include <cuda.h>

namespace workloads {

// The kernel's arguments, kept at a fixed address because launches and graph
// nodes take pointers to them (kernelParams).
struct SpinArguments {
  unsigned long long duration_ns = 0;
  CUdeviceptr counter = 0;  // unsigned long long* on the device; 0: count nothing

  SpinArguments() = default;
  SpinArguments(const SpinArguments&) = delete;
  SpinArguments& operator=(const SpinArguments&) = delete;

  void** kernel_params() { return params_; }

 private:
  void* params_[2] = {&duration_ns, &counter};
};

class SpinKernel {
 public:
  SpinKernel() = default;
  SpinKernel(const SpinKernel&) = delete;
  SpinKernel& operator=(const SpinKernel&) = delete;
  ~SpinKernel();

  CUresult load();
  CUfunction function() const { return function_; }

 private:
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
};

}  // namespace workloads
