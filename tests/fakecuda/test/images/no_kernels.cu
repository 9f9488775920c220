// An image without kernels: only a variable. The driver loads it all the same.
__device__ float only_data[3] = {1.0f, 2.0f, 3.0f};
