// NVIDIA's CUDA runtime on the simulated driver: the programs in runtime/,
// built by nvcc with shared and with static cudart, run against the
// simulator under both module loading modes.
#include <atomic>
#include <map>
#include <string>
#include <tuple>

#include "support.h"

namespace fakecuda::test {
namespace {

using Variant = std::tuple<std::string /*cudart*/, std::string /*CUDA_MODULE_LOADING*/>;

// The programs are nvcc's, built without the sanitizers of a sanitized
// build, whose simulator they load: its sanitizers' runtimes go first.
std::map<std::string, std::string> with_sanitizer_runtimes(std::map<std::string, std::string> env) {
#if defined(GPULIMIT_SANITIZER_RUNTIMES)
  env["LD_PRELOAD"] = GPULIMIT_SANITIZER_RUNTIMES;
#endif
  return env;
}

class Runtime : public testing::TestWithParam<Variant> {
 protected:
  // Runs the scenario on a machine of its own (a state file no other process
  // uses) with the simulator's default devices, and expects it to pass.
  void run(const std::vector<std::string>& args, int devices = 1) {
    static std::atomic<int> next{0};
    const auto& [cudart, loading] = GetParam();
    const std::string program =
        std::string(FAKECUDA_RUNTIME_PROGRAMS) + "/runtime_basics_" + cudart;
    const std::map<std::string, std::string> env = with_sanitizer_runtimes({
        {"LD_LIBRARY_PATH", FAKECUDA_LIB_DIR},
        {"FAKECUDA_STATE", test_dir() + "/runtime-" + std::to_string(next++) + ".state"},
        {"FAKECUDA_DEVICES", std::to_string(devices)},
        {"FAKECUDA_MEM", "16G"},
        {"FAKECUDA_CTX_MEM", "256M"},
        {"CUDA_MODULE_LOADING", loading},
    });
    int status = -1;
    const std::string output = run_program(program, args, env, &status);
    EXPECT_EQ(status, 0) << program << " failed:\n" << output;
  }
};

TEST_P(Runtime, DeviceCountAndProperties) {
  run({"devices", "1"});
}

TEST_P(Runtime, TwoDevices) {
  run({"devices", "2"}, 2);
}

TEST_P(Runtime, MemoryRoundTrip) {
  run({"memory"});
}

TEST_P(Runtime, StreamsEventsAndStreamOrderedMemory) {
  run({"streams"});
}

TEST_P(Runtime, DeviceResetStartsOver) {
  run({"reset"});
}

TEST_P(Runtime, KernelsLaunchedAndCapturedIntoAGraph) {
  run({"kernels"});
}

INSTANTIATE_TEST_SUITE_P(Cudart, Runtime,
                         testing::Combine(testing::Values("shared", "static"),
                                          testing::Values("LAZY", "EAGER")),
                         [](const testing::TestParamInfo<Variant>& variant) {
                           return std::get<0>(variant.param) + "_" + std::get<1>(variant.param);
                         });

// cuBLAS through cublasCreate: its start-up (cuBLASLt's own cudart, the
// private tables, occupancy of its CUkernels, module constants), then SGEMM
// and GEMM-Ex in single precision, as a real driver would run them.
void run_cublas(const std::string& scenario) {
  static std::atomic<int> next{0};
  const std::map<std::string, std::string> env = with_sanitizer_runtimes({
      {"LD_LIBRARY_PATH", FAKECUDA_LIB_DIR},
      {"FAKECUDA_STATE", test_dir() + "/cublas-" + std::to_string(next++) + ".state"},
  });
  int status = -1;
  const std::string program = std::string(FAKECUDA_RUNTIME_PROGRAMS) + "/runtime_cublas";
  const std::string output = run_program(program, {scenario}, env, &status);
  EXPECT_EQ(status, 0) << program << " " << scenario << " failed:\n" << output;
}

TEST(Cublas, CreateSgemmDestroy) {
  run_cublas("sgemm");
}

TEST(Cublas, GemmExInSinglePrecision) {
  run_cublas("gemm-ex");
}

}  // namespace
}  // namespace fakecuda::test
