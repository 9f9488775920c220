// forking_spinner: forks before touching CUDA, then parent and child each
// run --kernels spin kernels of --kernel-ns on device 0 and synchronise.
// The child is a new CUDA process with the tracer's state of its parent:
// the test of the tracer's fork handling (cupti_trace_test.cpp).
//
//   forking_spinner [--kernels N] [--kernel-ns NS]
//
// Prints "parent_pid=P child_pid=C child_status=S kernels=N" once the child
// has ended. Exit status 0 when both ran every kernel, 1 otherwise, 2 for a
// wrong command line.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cu_check.h"
#include "device_session.h"
#include "driver_api.h"
#include "spin_kernel.h"

namespace {

CUresult run_kernels(unsigned long kernels, unsigned long long kernel_ns) {
  std::string error;
  if (!workloads::load_driver_api(workloads::AccessPath::linked, workloads::StreamMode::legacy,
                                  error)) {
    workloads::report_error(error);
    return CUDA_ERROR_NOT_FOUND;
  }
  workloads::DeviceSession session;
  RETURN_IF_ERROR(session.open(0));
  workloads::SpinKernel kernel;
  RETURN_IF_ERROR(kernel.load());
  workloads::SpinArguments arguments;
  arguments.duration_ns = kernel_ns;
  for (unsigned long i = 0; i < kernels; ++i)
    CU_CHECK(cuLaunchKernel(kernel.function(), 1, 1, 1, 1, 1, 1, 0, nullptr,
                            arguments.kernel_params(), nullptr));
  CU_CHECK(cuCtxSynchronize());
  return CUDA_SUCCESS;
}

bool parse_number(const char* text, unsigned long long& out) {
  char* end = nullptr;
  out = std::strtoull(text, &end, 10);
  return *text && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long long kernels = 5, kernel_ns = 100'000;
  for (int i = 1; i < argc; ++i) {
    unsigned long long* target = std::strcmp(argv[i], "--kernels") == 0     ? &kernels
                                 : std::strcmp(argv[i], "--kernel-ns") == 0 ? &kernel_ns
                                                                            : nullptr;
    if (!target || i + 1 == argc || !parse_number(argv[++i], *target)) {
      std::fprintf(stderr, "usage: forking_spinner [--kernels N] [--kernel-ns NS]\n");
      return 2;
    }
  }
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) {
    std::perror("forking_spinner: fork");
    return 1;
  }
  const CUresult result = run_kernels(kernels, kernel_ns);
  // The child returns from main as a program does: exit() runs the atexit
  // handlers, the tracer's among them.
  if (child == 0) return result == CUDA_SUCCESS ? 0 : 1;
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  const int child_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::printf("parent_pid=%d child_pid=%d child_status=%d kernels=%llu\n",
              static_cast<int>(getpid()), static_cast<int>(child), child_status, kernels);
  return result == CUDA_SUCCESS && child_status == 0 ? 0 : 1;
}
