// Kernels the image tests load in every form nvcc writes (fatbin, cubin,
// PTX). Their bodies never run on the simulator; what matters is what the
// images say about them: names (C and C++), parameter layouts and variables.
struct Pair {
  int a;
  double b;
  char c[3];
};

// 112 bytes with an initialiser, like cuBLAS's internal constants.
__device__ int table[28] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
__constant__ float scales[4] = {1.5f, 2.5f};
__managed__ int counter = 7;

// Timed on the simulator: its first argument is its duration in ns.
extern "C" __global__ void spin_image(unsigned long long ns) {
  if (ns == 0) counter = 0;
}

__global__ void scale(float* out, float f, int n, Pair p, char c) {
  if (out) out[0] = f * n + p.b + c + table[0];
}

template <typename T>
__global__ void fill(T* out, T v) {
  out[0] = v + scales[0];
}
template __global__ void fill<double>(double*, double);
template __global__ void fill<int>(int*, int);
