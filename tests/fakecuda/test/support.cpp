#include "support.h"

#include <cstdlib>

namespace fakecuda::test {
namespace {

// Minimal PTX: what the simulator reads is the entry list and the
// parameter types; the bodies matter only on a real GPU.
constexpr const char* kPtx = R"ptx(
.version 8.0
.target sm_75
.address_size 64

.visible .entry spin(
  .param .u64 spin_param_0,
  .param .u64 spin_param_1
)
{
  ret;
}

.visible .entry touch(
  .param .u64 touch_param_0
)
{
  ret;
}
)ptx";

CUmodule module() {
  static CUmodule m = [] {
    CUmodule loaded = nullptr;
    EXPECT_EQ(cuModuleLoadData(&loaded, kPtx), CUDA_SUCCESS);
    return loaded;
  }();
  return m;
}

}  // namespace

CUcontext init_primary(int device) {
  EXPECT_EQ(cuInit(0), CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  EXPECT_EQ(cuDevicePrimaryCtxRetain(&ctx, device), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  return ctx;
}

CUfunction spin_kernel() {
  CUfunction f = nullptr;
  EXPECT_EQ(cuModuleGetFunction(&f, module(), "spin"), CUDA_SUCCESS);
  return f;
}

CUfunction plain_kernel() {
  CUfunction f = nullptr;
  EXPECT_EQ(cuModuleGetFunction(&f, module(), "touch"), CUDA_SUCCESS);
  return f;
}

size_t free_memory() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cuMemGetInfo_v2(&free, &total), CUDA_SUCCESS);
  return free;
}

std::string test_dir() {
  return std::getenv("FAKECUDA_TEST_DIR");
}

Helper spawn_helper(const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& env) {
  return spawn_program(FAKECUDA_HELPER, args, env);
}

Helper spawn_program(const std::string& path, const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env) {
  gpulimit::testing::Launch launch;
  launch.argv = {path};
  launch.argv.insert(launch.argv.end(), args.begin(), args.end());
  launch.environment =
      gpulimit::testing::this_environment(gpulimit::testing::Variables(env.begin(), env.end()));
  launch.in = gpulimit::testing::Stream::pipe();
  launch.out = gpulimit::testing::Stream::pipe();
  Helper h;
  h.process = gpulimit::testing::Process(launch);
  h.pid = h.process.pid();
  return h;
}

std::string Helper::read_line() {
  return process.read_line(std::chrono::hours(1)).value_or("");
}

std::string Helper::ask(const std::string& line) {
  if (!process.say(line)) return "";
  return read_line();
}

int Helper::wait() {
  process.close_stdin();
  return process.wait().shell();
}

std::string run_helper(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env, int* status) {
  return run_program(FAKECUDA_HELPER, args, env, status);
}

std::string run_program(const std::string& path, const std::vector<std::string>& args,
                        const std::map<std::string, std::string>& env, int* status) {
  Helper h = spawn_program(path, args, env);
  const std::string all = h.process.read_stdout_to_end();
  int code = h.wait();
  if (status) *status = code;
  return all;
}

}  // namespace fakecuda::test
