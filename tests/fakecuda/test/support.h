// Helpers shared by the simulator's tests.
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "gpulimit/testing/process.h"

#define ASSERT_CU(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call
#define EXPECT_CU(call) EXPECT_EQ((call), CUDA_SUCCESS) << #call

namespace fakecuda::test {

// cuInit, and the primary context of `device` made current.
CUcontext init_primary(int device = 0);

// A loaded module holding the timed `spin(u64 ns, u64* counter)` kernel and
// a plain `touch(u64* p)` kernel.
CUfunction spin_kernel();
CUfunction plain_kernel();

// Free and total memory of the current context's device.
size_t free_memory();

// A helper process (fakecuda_helper) running `args` with `env` added, its
// stdin and stdout on pipes; killed, if it still runs, when it goes.
struct Helper {
  gpulimit::testing::Process process;
  pid_t pid = -1;
  std::string read_line();  // blocks for the next line ("" at EOF)
  // Sends `line` to its stdin and returns the line it answers.
  std::string ask(const std::string& line);
  int wait();  // exit status, or 128+signal
};
Helper spawn_helper(const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& env = {});

// Any program, the same way.
Helper spawn_program(const std::string& path, const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env = {});

// Runs a helper to completion and returns everything it printed.
std::string run_helper(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env = {}, int* status = nullptr);

// Runs a program to completion and returns everything it printed to stdout.
std::string run_program(const std::string& path, const std::vector<std::string>& args,
                        const std::map<std::string, std::string>& env = {}, int* status = nullptr);

std::string test_dir();

}  // namespace fakecuda::test
