#include "support.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

extern char** environ;

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
  std::vector<std::string> vars;
  for (char** e = environ; *e; ++e) {
    std::string var = *e;
    if (!env.count(var.substr(0, var.find('=')))) vars.push_back(var);
  }
  for (const auto& [key, value] : env)
    vars.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (auto& v : vars)
    envp.push_back(v.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage = {path};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  int pipe_fds[2];
  int input_fds[2];
  EXPECT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(input_fds, O_CLOEXEC), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, input_fds[0], 0);
  Helper h;
  EXPECT_EQ(posix_spawn(&h.pid, path.c_str(), &actions, nullptr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  close(input_fds[0]);
  h.out = pipe_fds[0];
  h.in = input_fds[1];
  return h;
}

std::string Helper::read_line() {
  std::string line;
  char c;
  while (read(out, &c, 1) == 1) {
    if (c == '\n') return line;
    line += c;
  }
  return line;
}

std::string Helper::ask(const std::string& line) {
  const std::string sent = line + "\n";
  if (write(in, sent.data(), sent.size()) != static_cast<ssize_t>(sent.size())) return "";
  return read_line();
}

int Helper::wait() {
  int status = 0;
  if (in >= 0) close(in);
  in = -1;
  waitpid(pid, &status, 0);
  close(out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string run_helper(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env, int* status) {
  return run_program(FAKECUDA_HELPER, args, env, status);
}

std::string run_program(const std::string& path, const std::vector<std::string>& args,
                        const std::map<std::string, std::string>& env, int* status) {
  Helper h = spawn_program(path, args, env);
  std::string all;
  char buffer[4096];
  ssize_t n;
  while ((n = read(h.out, buffer, sizeof(buffer))) > 0)
    all.append(buffer, static_cast<size_t>(n));
  int code = h.wait();
  if (status) *status = code;
  return all;
}

}  // namespace fakecuda::test
