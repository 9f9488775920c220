// Launches of one kernel per call: cuLaunchKernel, cuLaunchKernelEx and
// cuLaunchCooperativeKernel, each in the --stream-mode variant.
#include "cu_check.h"
#include "launcher.h"

namespace workloads {
namespace {

class KernelLauncher final : public Launcher {
 public:
  explicit KernelLauncher(const LaunchSetup& setup) : setup_(setup) {}
  uint32_t kernels_per_launch() const override { return 1; }

  CUresult launch(size_t stream_index) override {
    CU_CHECK(cuLaunchKernel(setup_.function, 1, 1, 1, 1, 1, 1, 0, setup_.streams[stream_index],
                            setup_.kernel_params, nullptr));
    return CUDA_SUCCESS;
  }

 private:
  const LaunchSetup& setup_;
};

// The launch cudaLaunchKernelExC makes, and so the one Hopper GEMMs use.
class KernelExLauncher final : public Launcher {
 public:
  explicit KernelExLauncher(const LaunchSetup& setup) : setup_(setup) {}
  uint32_t kernels_per_launch() const override { return 1; }

  CUresult launch(size_t stream_index) override {
    CUlaunchConfig config = {};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    config.hStream = setup_.streams[stream_index];
    CU_CHECK(cuLaunchKernelEx(&config, setup_.function, setup_.kernel_params, nullptr));
    return CUDA_SUCCESS;
  }

 private:
  const LaunchSetup& setup_;
};

class CooperativeLauncher final : public Launcher {
 public:
  explicit CooperativeLauncher(const LaunchSetup& setup) : setup_(setup) {}
  uint32_t kernels_per_launch() const override { return 1; }

  CUresult launch(size_t stream_index) override {
    CU_CHECK(cuLaunchCooperativeKernel(setup_.function, 1, 1, 1, 1, 1, 1, 0,
                                       setup_.streams[stream_index], setup_.kernel_params));
    return CUDA_SUCCESS;
  }

 private:
  const LaunchSetup& setup_;
};

}  // namespace

CUresult make_kernel_launcher(const LaunchSetup& setup, std::unique_ptr<Launcher>& out) {
  out = std::make_unique<KernelLauncher>(setup);
  return CUDA_SUCCESS;
}

CUresult make_kernel_ex_launcher(const LaunchSetup& setup, std::unique_ptr<Launcher>& out) {
  out = std::make_unique<KernelExLauncher>(setup);
  return CUDA_SUCCESS;
}

CUresult make_cooperative_launcher(const LaunchSetup& setup, std::unique_ptr<Launcher>& out) {
  int supported = 0;
  CU_CHECK(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, setup.device));
  if (!supported) {
    report_error("--launch cooperative: the device does not support cooperative launches");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  out = std::make_unique<CooperativeLauncher>(setup);
  return CUDA_SUCCESS;
}

}  // namespace workloads
