// Building the op a kernel launch enqueues, shared by launches and graph
// kernel nodes.
#pragma once

#include "driver.h"

namespace fakecuda {

struct LaunchShape {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_mem;
  bool cooperative;
};

// Validates the launch as the real driver does and builds its op (caller
// holds Driver::mu). `f` may be a CUkernel, resolved in `ctx` (nullptr: the
// current context).
CUresult kernel_op_locked(CUfunction f, const LaunchShape& shape, void** params, void** extra,
                          Op* out, CUctx_st* ctx = nullptr);

}  // namespace fakecuda
