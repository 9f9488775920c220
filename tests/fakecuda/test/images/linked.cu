// A second translation unit for the link test: its own kernel and variable.
__device__ unsigned long long offsets[2] = {0x1122334455667788ull, 42};

extern "C" __global__ void gather(const float* in, float* out, int stride) {
  out[0] = in[stride] + offsets[0];
}
