// A CUDA runtime (cudart) program without kernels, run on the simulated
// driver by test_runtime.cpp, built once with shared and once with static
// cudart. Each scenario prints one line per failed check and exits 1 if any
// failed, 0 otherwise.
//
//   runtime_basics devices COUNT   device count, properties, cudaSetDevice
//   runtime_basics memory          cudaMalloc/Memcpy/Memset/Free, cudaMemGetInfo
//   runtime_basics streams         streams, events, stream-ordered allocation
//   runtime_basics reset           cudaDeviceReset and the runtime after it
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int failures = 0;

bool check(bool ok, const char* what, int line) {
  if (!ok) {
    std::printf("line %d: %s\n", line, what);
    ++failures;
  }
  return ok;
}

bool check_rt(cudaError_t e, const char* what, int line) {
  if (e != cudaSuccess) {
    std::printf("line %d: %s: %s\n", line, what, cudaGetErrorString(e));
    ++failures;
  }
  return e == cudaSuccess;
}

#define CHECK(cond) check((cond), #cond, __LINE__)
#define RT(call) check_rt((call), #call, __LINE__)

// The simulator's defaults (tests/fakecuda/README.md).
constexpr size_t kDeviceMemory = 16ull << 30;

void devices(int expected) {
  int count = -1;
  if (!RT(cudaGetDeviceCount(&count))) return;
  CHECK(count == expected);
  for (int dev = 0; dev < count; ++dev) {
    cudaDeviceProp prop{};
    if (!RT(cudaGetDeviceProperties(&prop, dev))) continue;
    CHECK(std::strcmp(prop.name, "FakeCUDA Simulated GPU") == 0);
    CHECK(prop.major == 9 && prop.minor == 0);
    CHECK(prop.multiProcessorCount == 132);
    CHECK(prop.totalGlobalMem == kDeviceMemory);
    CHECK(prop.pciBusID == 0x10 + dev);
    int sms = 0;
    RT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CHECK(sms == 132);
    // Each device gets its own context, and memory allocated there is taken
    // from that device.
    if (!RT(cudaSetDevice(dev))) continue;
    int current = -1;
    RT(cudaGetDevice(&current));
    CHECK(current == dev);
    size_t free_before = 0, free_after = 0, total = 0;
    RT(cudaMemGetInfo(&free_before, &total));
    void* p = nullptr;
    RT(cudaMalloc(&p, 64 << 20));
    RT(cudaMemGetInfo(&free_after, &total));
    CHECK(free_after + (64 << 20) <= free_before);
    RT(cudaFree(p));
  }
  CHECK(cudaSetDevice(count) == cudaErrorInvalidDevice);
}

void memory() {
  size_t free_before = 0, total = 0;
  if (!RT(cudaMemGetInfo(&free_before, &total))) return;
  CHECK(total == kDeviceMemory);
  constexpr size_t kBytes = 8 << 20;
  void* device = nullptr;
  if (!RT(cudaMalloc(&device, kBytes))) return;
  size_t free_after = 0;
  RT(cudaMemGetInfo(&free_after, &total));
  CHECK(free_after + kBytes <= free_before);

  std::vector<unsigned char> out(kBytes), back(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i)
    out[i] = static_cast<unsigned char>(i * 7 + 3);
  RT(cudaMemcpy(device, out.data(), kBytes, cudaMemcpyHostToDevice));
  RT(cudaMemcpy(back.data(), device, kBytes, cudaMemcpyDeviceToHost));
  CHECK(back == out);

  RT(cudaMemset(device, 0xab, kBytes / 2));
  RT(cudaMemcpy(back.data(), device, kBytes, cudaMemcpyDeviceToHost));
  CHECK(back[0] == 0xab && back[kBytes / 2 - 1] == 0xab);
  CHECK(back[kBytes / 2] == out[kBytes / 2]);

  void* second = nullptr;
  RT(cudaMalloc(&second, kBytes));
  RT(cudaMemcpy(second, device, kBytes, cudaMemcpyDeviceToDevice));
  std::fill(back.begin(), back.end(), 0);
  RT(cudaMemcpy(back.data(), second, kBytes, cudaMemcpyDeviceToHost));
  CHECK(back[0] == 0xab && back[kBytes - 1] == out[kBytes - 1]);

  RT(cudaFree(second));
  RT(cudaFree(device));
  RT(cudaFree(nullptr));  // a no-op that succeeds
  size_t free_end = 0;
  RT(cudaMemGetInfo(&free_end, &total));
  CHECK(free_end == free_before);
}

void streams() {
  cudaStream_t stream = nullptr;
  if (!RT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking))) return;
  cudaEvent_t start = nullptr, stop = nullptr;
  RT(cudaEventCreate(&start));
  RT(cudaEventCreate(&stop));

  constexpr size_t kBytes = 1 << 20;
  std::vector<unsigned char> out(kBytes, 0x5a), back(kBytes, 0);
  void* device = nullptr;
  RT(cudaMallocAsync(&device, kBytes, stream));
  RT(cudaEventRecord(start, stream));
  RT(cudaMemcpyAsync(device, out.data(), kBytes, cudaMemcpyHostToDevice, stream));
  RT(cudaMemcpyAsync(back.data(), device, kBytes, cudaMemcpyDeviceToHost, stream));
  RT(cudaEventRecord(stop, stream));
  RT(cudaFreeAsync(device, stream));
  RT(cudaStreamSynchronize(stream));
  CHECK(back == out);
  CHECK(cudaEventQuery(stop) == cudaSuccess);
  float ms = -1;
  RT(cudaEventElapsedTime(&ms, start, stop));
  CHECK(ms >= 0);

  // The legacy default stream and the device as a whole.
  void* p = nullptr;
  RT(cudaMallocAsync(&p, kBytes, nullptr));
  RT(cudaMemsetAsync(p, 0x11, kBytes, nullptr));
  RT(cudaMemcpyAsync(back.data(), p, kBytes, cudaMemcpyDeviceToHost, nullptr));
  RT(cudaFreeAsync(p, nullptr));
  RT(cudaDeviceSynchronize());
  CHECK(back[0] == 0x11 && back[kBytes - 1] == 0x11);

  RT(cudaEventDestroy(start));
  RT(cudaEventDestroy(stop));
  RT(cudaStreamDestroy(stream));
}

void reset() {
  size_t free_before = 0, total = 0;
  if (!RT(cudaMemGetInfo(&free_before, &total))) return;
  void* p = nullptr;
  RT(cudaMalloc(&p, 64 << 20));
  // The reset destroys the primary context and runs the runtime's
  // context-local storage destructors, which call back into the driver.
  RT(cudaDeviceReset());
  // The runtime starts over: a new context, and the old memory is gone.
  size_t free_after = 0;
  RT(cudaMemGetInfo(&free_after, &total));
  CHECK(free_after == free_before);
  std::vector<int> out(1024, 42), back(1024, 0);
  RT(cudaMalloc(&p, out.size() * sizeof(int)));
  RT(cudaMemcpy(p, out.data(), out.size() * sizeof(int), cudaMemcpyHostToDevice));
  RT(cudaMemcpy(back.data(), p, out.size() * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(back == out);
  RT(cudaFree(p));
  RT(cudaDeviceReset());
}

// A kernel with a C++ name and parameters of several sizes, launched with
// <<<>>> (cudart fetches it with cuLibraryGetKernel at the first launch), then
// captured into a graph and replayed. Kernels do not compute here: the
// buffer keeps what it held.
struct Scale {
  float factor;
  int offset;
};

__global__ void scale_kernel(float* data, Scale scale, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] = data[i] * scale.factor + scale.offset;
}

void kernels() {
  constexpr int n = 4096;
  float* data = nullptr;
  if (!RT(cudaMalloc(&data, n * sizeof(float)))) return;
  RT(cudaMemset(data, 0, n * sizeof(float)));
  scale_kernel<<<n / 256, 256>>>(data, Scale{2.0f, 1}, n);
  RT(cudaGetLastError());
  RT(cudaDeviceSynchronize());

  cudaStream_t stream = nullptr;
  RT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  RT(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 3; ++i)
    scale_kernel<<<n / 256, 256, 0, stream>>>(data, Scale{1.0f, i}, n);
  RT(cudaStreamEndCapture(stream, &graph));
  size_t nodes = 0;
  RT(cudaGraphGetNodes(graph, nullptr, &nodes));
  CHECK(nodes == 3);
  RT(cudaGraphInstantiate(&exec, graph, 0));
  RT(cudaGraphLaunch(exec, stream));
  RT(cudaStreamSynchronize(stream));
  std::vector<float> back(n, -1.0f);
  RT(cudaMemcpy(back.data(), data, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(back == std::vector<float>(n, 0.0f));
  RT(cudaGraphExecDestroy(exec));
  RT(cudaGraphDestroy(graph));
  RT(cudaStreamDestroy(stream));
  RT(cudaFree(data));
}

}  // namespace

int main(int argc, char** argv) {
  const char* scenario = argc > 1 ? argv[1] : "";
  if (std::strcmp(scenario, "devices") == 0 && argc > 2)
    devices(std::atoi(argv[2]));
  else if (std::strcmp(scenario, "memory") == 0)
    memory();
  else if (std::strcmp(scenario, "streams") == 0)
    streams();
  else if (std::strcmp(scenario, "reset") == 0)
    reset();
  else if (std::strcmp(scenario, "kernels") == 0)
    kernels();
  else {
    std::fprintf(stderr, "usage: %s devices COUNT | memory | streams | reset | kernels\n", argv[0]);
    return 2;
  }
  return failures == 0 ? 0 : 1;
}
