// Kernel launches: every path that puts work on the GPU. The time-slicing
// gate belongs here; until it exists these hooks forward unchanged, and their
// cost with no compute limit is what benchmarks/ measures.
#include "real_driver.h"

GPULIMIT_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int smem, CUstream s,
                                        void** params, void** extra) {
  GPULIMIT_CALL_REAL(cuLaunchKernel, f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}

GPULIMIT_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                             unsigned int gz, unsigned int bx, unsigned int by,
                                             unsigned int bz, unsigned int smem, CUstream s,
                                             void** params, void** extra) {
  GPULIMIT_CALL_REAL(cuLaunchKernel_ptsz, f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}

GPULIMIT_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                                          void** extra) {
  GPULIMIT_CALL_REAL(cuLaunchKernelEx, config, f, params, extra);
}

GPULIMIT_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                               void** params, void** extra) {
  GPULIMIT_CALL_REAL(cuLaunchKernelEx_ptsz, config, f, params, extra);
}

GPULIMIT_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                                   unsigned int gz, unsigned int bx,
                                                   unsigned int by, unsigned int bz,
                                                   unsigned int smem, CUstream s, void** params) {
  GPULIMIT_CALL_REAL(cuLaunchCooperativeKernel, f, gx, gy, gz, bx, by, bz, smem, s, params);
}

GPULIMIT_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx,
                                                        unsigned int gy, unsigned int gz,
                                                        unsigned int bx, unsigned int by,
                                                        unsigned int bz, unsigned int smem,
                                                        CUstream s, void** params) {
  GPULIMIT_CALL_REAL(cuLaunchCooperativeKernel_ptsz, f, gx, gy, gz, bx, by, bz, smem, s, params);
}

GPULIMIT_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
  GPULIMIT_CALL_REAL(cuGraphLaunch, exec, s);
}

GPULIMIT_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) {
  GPULIMIT_CALL_REAL(cuGraphLaunch_ptsz, exec, s);
}
