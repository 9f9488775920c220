// Building the op a kernel launch enqueues, shared by launches and graph
// kernel nodes.
#pragma once

#include <vector>

#include "driver.h"

namespace fakecuda {

struct LaunchShape {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_mem;
  bool cooperative;
};

// What a kernel launch asked for: the handle as given (a CUfunction or a
// CUkernel) with the context a CUkernel was named in, the shape, and a copy of
// every argument, laid out as the function's parameter buffer.
struct KernelLaunch {
  CUfunction func = nullptr;
  CUctx_st* ctx = nullptr;
  LaunchShape shape{};
  std::vector<unsigned char> args;
  std::vector<void*> arg_pointers;  // kernelParams: one pointer into `args` per parameter
};

// Validates the launch as the real driver does and builds its op (caller
// holds Driver::mu). `f` may be a CUkernel, resolved in `ctx` (nullptr: the
// current context). With `keep_launch`, the op keeps a copy of the launch
// (Op::launch): what becomes a graph node needs it, a launch into a stream
// that runs it does not.
CUresult kernel_op_locked(CUfunction f, const LaunchShape& shape, void** params, void** extra,
                          Op* out, CUctx_st* ctx = nullptr, bool keep_launch = true);

}  // namespace fakecuda
