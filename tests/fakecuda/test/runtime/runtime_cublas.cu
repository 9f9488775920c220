// cuBLAS on the simulated driver: cublasCreate, a GEMM, synchronise, destroy.
// Kernels do not compute on the simulator, so what is checked is that every
// call succeeds and that the result buffer holds what was there before.
//
//   runtime_cublas sgemm | gemm-ex
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#define CHECK_CUDA(call)                                                                         \
  do {                                                                                           \
    cudaError_t e = (call);                                                                      \
    if (e != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e)); \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)
#define CHECK_BLAS(call)                                                                 \
  do {                                                                                   \
    cublasStatus_t s = (call);                                                           \
    if (s != CUBLAS_STATUS_SUCCESS) {                                                    \
      std::fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #call, int(s)); \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const bool gemm_ex = std::strcmp(argv[1], "gemm-ex") == 0;
  constexpr int n = 128;
  const size_t bytes = size_t{n} * n * sizeof(float);
  cublasHandle_t handle = nullptr;
  CHECK_BLAS(cublasCreate(&handle));
  float *a = nullptr, *c = nullptr;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&c, bytes));
  std::vector<float> host(size_t{n} * n, 2.0f);
  CHECK_CUDA(cudaMemcpy(a, host.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(c, host.data(), bytes, cudaMemcpyHostToDevice));
  const float one = 1.0f, zero = 0.0f;
  if (gemm_ex) {
    CHECK_BLAS(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one, a, CUDA_R_32F, n, a,
                            CUDA_R_32F, n, &zero, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
  } else {
    CHECK_BLAS(
        cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, a, n, &zero, c, n));
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> back(size_t{n} * n, 0.0f);
  CHECK_CUDA(cudaMemcpy(back.data(), c, bytes, cudaMemcpyDeviceToHost));
  if (back != host) {
    std::fprintf(stderr, "the result buffer changed: kernels do not write on the simulator\n");
    return 1;
  }
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(c));
  CHECK_BLAS(cublasDestroy(handle));
  std::printf("ok\n");
  return 0;
}
