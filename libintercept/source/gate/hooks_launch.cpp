// Kernel launches: every path that puts work on the GPU, each through the
// launch gate (launch_gate.h). Without a server configured the gate is one
// relaxed load; holding the token, a load of the device's token word and two
// stores to this thread's sequence word. benchmarks/ measures both.
#include "gate/launch_gate.h"
#include "lookup/real_driver.h"
#include "memory/graph_books.h"

using gpulimit::gate::launch;
using gpulimit::gate::StreamMode;
namespace real = gpulimit::real;

GPULIMIT_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int smem, CUstream s,
                                        void** params, void** extra) {
  return launch(s, StreamMode::kLegacy, real::cuLaunchKernel, f, gx, gy, gz, bx, by, bz, smem, s,
                params, extra);
}

GPULIMIT_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                             unsigned int gz, unsigned int bx, unsigned int by,
                                             unsigned int bz, unsigned int smem, CUstream s,
                                             void** params, void** extra) {
  return launch(s, StreamMode::kPerThread, real::cuLaunchKernel_ptsz, f, gx, gy, gz, bx, by, bz,
                smem, s, params, extra);
}

GPULIMIT_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                                          void** extra) {
  return launch(config ? config->hStream : nullptr, StreamMode::kLegacy, real::cuLaunchKernelEx,
                config, f, params, extra);
}

GPULIMIT_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                               void** params, void** extra) {
  return launch(config ? config->hStream : nullptr, StreamMode::kPerThread,
                real::cuLaunchKernelEx_ptsz, config, f, params, extra);
}

GPULIMIT_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                                   unsigned int gz, unsigned int bx,
                                                   unsigned int by, unsigned int bz,
                                                   unsigned int smem, CUstream s, void** params) {
  return launch(s, StreamMode::kLegacy, real::cuLaunchCooperativeKernel, f, gx, gy, gz, bx, by, bz,
                smem, s, params);
}

GPULIMIT_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx,
                                                        unsigned int gy, unsigned int gz,
                                                        unsigned int bx, unsigned int by,
                                                        unsigned int bz, unsigned int smem,
                                                        CUstream s, void** params) {
  return launch(s, StreamMode::kPerThread, real::cuLaunchCooperativeKernel_ptsz, f, gx, gy, gz, bx,
                by, bz, smem, s, params);
}

// A graph launch may also allocate and free graph memory (graph_books.h).
GPULIMIT_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
  const CUresult result = launch(s, StreamMode::kLegacy, real::cuGraphLaunch, exec, s);
  if (result == CUDA_SUCCESS) gpulimit::graph_books::launched(exec);
  return result;
}

GPULIMIT_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) {
  const CUresult result = launch(s, StreamMode::kPerThread, real::cuGraphLaunch_ptsz, exec, s);
  if (result == CUDA_SUCCESS) gpulimit::graph_books::launched(exec);
  return result;
}
