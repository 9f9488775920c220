// Streams, events, launches and host functions. Kernel times live on the
// simulated device clock, so lower bounds are exact; upper bounds are left
// loose (the test machine is small and shared).
#include <atomic>
#include <chrono>
#include <thread>

#include "support.h"

namespace fakecuda::test {
namespace {

constexpr unsigned long long kMs = 1'000'000;

class Execution : public ::testing::Test {
 protected:
  void SetUp() override {
    init_primary(0);
    spin_ = spin_kernel();
  }
  CUresult spin(CUstream stream, unsigned long long ns) {
    void* params[] = {&ns, &counter_};
    return cuLaunchKernel(spin_, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr);
  }
  CUfunction spin_ = nullptr;
  unsigned long long* counter_ = nullptr;
};

TEST_F(Execution, LaunchesAreAsynchronousAndEventsTimeThem) {
  CUstream stream = nullptr;
  CUevent start = nullptr, end = nullptr;
  ASSERT_CU(cuStreamCreate(&stream, 0));
  ASSERT_CU(cuEventCreate(&start, 0));
  ASSERT_CU(cuEventCreate(&end, 0));
  ASSERT_CU(cuEventRecord(start, stream));
  for (int i = 0; i < 5; ++i)
    ASSERT_CU(spin(stream, 100 * kMs));
  ASSERT_CU(cuEventRecord(end, stream));
  EXPECT_EQ(cuStreamQuery(stream), CUDA_ERROR_NOT_READY) << "500 ms of work cannot be done yet";
  EXPECT_EQ(cuEventQuery(end), CUDA_ERROR_NOT_READY);
  float ms = 0;
  EXPECT_EQ(cuEventElapsedTime(&ms, start, end), CUDA_ERROR_NOT_READY);
  ASSERT_CU(cuEventSynchronize(end));
  EXPECT_CU(cuStreamQuery(stream));
  ASSERT_CU(cuEventElapsedTime(&ms, start, end));
  EXPECT_GE(ms, 500.0f);
  EXPECT_LT(ms, 5000.0f);
  ASSERT_CU(cuEventDestroy_v2(start));
  ASSERT_CU(cuEventDestroy_v2(end));
  ASSERT_CU(cuStreamDestroy_v2(stream));
}

TEST_F(Execution, EventErrors) {
  CUevent a = nullptr, b = nullptr, untimed = nullptr;
  ASSERT_CU(cuEventCreate(&a, 0));
  ASSERT_CU(cuEventCreate(&b, 0));
  ASSERT_CU(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
  float ms = 0;
  EXPECT_EQ(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE) << "never recorded";
  EXPECT_CU(cuEventQuery(a)) << "an unrecorded event is complete";
  ASSERT_CU(cuEventRecord(a, nullptr));
  ASSERT_CU(cuEventRecord(untimed, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_EQ(cuEventElapsedTime(&ms, a, untimed), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuEventElapsedTime(nullptr, a, a), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuEventDestroy_v2(a));
  EXPECT_EQ(cuEventRecord(a, nullptr), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(Execution, StreamsRunInOrderAndWaitForEvents) {
  CUstream first = nullptr, second = nullptr;
  CUevent done = nullptr, waited = nullptr, begin = nullptr;
  ASSERT_CU(cuStreamCreate(&first, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamCreate(&second, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuEventCreate(&done, 0));
  ASSERT_CU(cuEventCreate(&waited, 0));
  ASSERT_CU(cuEventCreate(&begin, 0));
  ASSERT_CU(cuEventRecord(begin, second));
  ASSERT_CU(spin(first, 30 * kMs));
  ASSERT_CU(cuEventRecord(done, first));
  ASSERT_CU(cuStreamWaitEvent(second, done, 0));
  ASSERT_CU(cuEventRecord(waited, second));
  ASSERT_CU(cuStreamSynchronize(second));
  float ms = 0;
  ASSERT_CU(cuEventElapsedTime(&ms, begin, waited));
  EXPECT_GE(ms, 30.0f) << "the second stream waited for the first's kernel";
}

TEST_F(Execution, KernelsOfOneProcessNeverOverlap) {
  // Two streams, one device: the device runs one kernel at a time.
  CUstream a = nullptr, b = nullptr;
  CUevent start = nullptr, end = nullptr;
  ASSERT_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuEventCreate(&start, 0));
  ASSERT_CU(cuEventCreate(&end, 0));
  ASSERT_CU(cuEventRecord(start, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  for (int i = 0; i < 4; ++i) {
    ASSERT_CU(spin(a, 10 * kMs));
    ASSERT_CU(spin(b, 10 * kMs));
  }
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuEventRecord(end, nullptr));
  ASSERT_CU(cuEventSynchronize(end));
  float ms = 0;
  ASSERT_CU(cuEventElapsedTime(&ms, start, end));
  EXPECT_GE(ms, 80.0f);
}

TEST_F(Execution, LegacyDefaultStreamSynchronisesWithBlockingStreams) {
  CUstream blocking = nullptr, non_blocking = nullptr;
  CUevent begin = nullptr, after_legacy = nullptr, free_running = nullptr;
  ASSERT_CU(cuStreamCreate(&blocking, 0));
  ASSERT_CU(cuStreamCreate(&non_blocking, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuEventCreate(&begin, 0));
  ASSERT_CU(cuEventCreate(&after_legacy, 0));
  ASSERT_CU(cuEventCreate(&free_running, 0));
  ASSERT_CU(cuEventRecord(begin, non_blocking));
  ASSERT_CU(cuStreamSynchronize(non_blocking));
  ASSERT_CU(spin(nullptr, 300 * kMs));                   // legacy stream
  ASSERT_CU(cuEventRecord(after_legacy, blocking));      // waits for it
  ASSERT_CU(cuEventRecord(free_running, non_blocking));  // does not
  ASSERT_CU(cuCtxSynchronize());
  float blocked = 0, not_blocked = 0;
  ASSERT_CU(cuEventElapsedTime(&blocked, begin, after_legacy));
  ASSERT_CU(cuEventElapsedTime(&not_blocked, begin, free_running));
  EXPECT_GE(blocked, 300.0f);
  EXPECT_LT(not_blocked, 300.0f);
}

TEST_F(Execution, PerThreadDefaultStreamIsPerThread) {
  CUstream mine = nullptr, theirs = nullptr;
  ASSERT_CU(cuStreamGetId(CU_STREAM_PER_THREAD, reinterpret_cast<unsigned long long*>(&mine)));
  CUcontext ctx = nullptr;
  ASSERT_CU(cuCtxGetCurrent(&ctx));
  std::thread other([&] {
    cuCtxSetCurrent(ctx);
    cuStreamGetId(CU_STREAM_PER_THREAD, reinterpret_cast<unsigned long long*>(&theirs));
  });
  other.join();
  EXPECT_NE(mine, theirs);
  unsigned long long legacy_id = 0, legacy_again = 0;
  ASSERT_CU(cuStreamGetId(nullptr, &legacy_id));
  ASSERT_CU(cuStreamGetId(CU_STREAM_LEGACY, &legacy_again));
  EXPECT_EQ(legacy_id, legacy_again);
  // _ptsz entry points read NULL as the per-thread stream.
  unsigned long long ptsz_null = 0;
  ASSERT_CU(cuStreamGetId_ptsz(nullptr, &ptsz_null));
  EXPECT_EQ(ptsz_null, reinterpret_cast<unsigned long long>(mine));
}

TEST_F(Execution, HostFunctionsRunInStreamOrder) {
  std::atomic<int> order{0};
  struct Probe {
    std::atomic<int>* order;
    int seen = -1;
  } probe{&order};
  CUstream stream = nullptr;
  ASSERT_CU(cuStreamCreate(&stream, 0));
  ASSERT_CU(spin(stream, 20 * kMs));
  ASSERT_CU(cuLaunchHostFunc(
      stream,
      [](void* p) {
        auto* self = static_cast<Probe*>(p);
        self->seen = self->order->fetch_add(1);
      },
      &probe));
  ASSERT_CU(cuStreamAddCallback(
      stream,
      [](CUstream, CUresult status, void* p) {
        EXPECT_EQ(status, CUDA_SUCCESS);
        static_cast<Probe*>(p)->order->fetch_add(10);
      },
      &probe, 0));
  ASSERT_CU(cuStreamSynchronize(stream));
  EXPECT_EQ(probe.seen, 0);
  EXPECT_EQ(order.load(), 11);
}

TEST_F(Execution, LaunchPathsAndValidation) {
  unsigned long long ns = kMs;
  void* params[] = {&ns, &counter_};
  CUstream stream = nullptr;
  ASSERT_CU(cuStreamCreate(&stream, 0));
  CUlaunchAttribute cooperative{};
  cooperative.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  cooperative.value.cooperative = 1;
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 64;
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = stream;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  EXPECT_CU(cuLaunchKernelEx(&config, spin_, params, nullptr));
  EXPECT_CU(cuLaunchCooperativeKernel(spin_, 132, 1, 1, 64, 1, 1, 0, stream, params));
  EXPECT_EQ(cuLaunchCooperativeKernel(spin_, 100000, 1, 1, 64, 1, 1, 0, stream, params),
            CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  EXPECT_CU(cuLaunchKernel_ptsz(spin_, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  EXPECT_EQ(cuLaunchKernel(spin_, 0, 1, 1, 1, 1, 1, 0, stream, params, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(spin_, 1, 1, 1, 2048, 1, 1, 0, stream, params, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(&ns), 1, 1, 1, 1, 1, 1, 0, stream, params,
                           nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(
      cuLaunchKernel(spin_, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(&ns), params, nullptr),
      CUDA_ERROR_INVALID_HANDLE);
  // The duration may come packed in `extra`, as Triton passes it.
  struct {
    unsigned long long ns;
    unsigned long long* counter;
  } packed{kMs, nullptr};
  size_t size = sizeof(packed);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  EXPECT_CU(cuLaunchKernel(spin_, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, extra));
  ASSERT_CU(cuCtxSynchronize());
}

TEST_F(Execution, LaunchWithoutContextFails) {
  CUcontext ctx = nullptr;
  ASSERT_CU(cuCtxPopCurrent_v2(&ctx));
  unsigned long long ns = kMs;
  void* params[] = {&ns, &counter_};
  EXPECT_EQ(cuLaunchKernel(spin_, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr),
            CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_CU(cuCtxPushCurrent_v2(ctx));
}

TEST_F(Execution, DestroyingABusyStreamLetsItsWorkFinish) {
  CUstream stream = nullptr;
  CUevent done = nullptr;
  ASSERT_CU(cuEventCreate(&done, 0));
  ASSERT_CU(cuStreamCreate(&stream, 0));
  ASSERT_CU(spin(stream, 20 * kMs));
  ASSERT_CU(cuEventRecord(done, stream));
  ASSERT_CU(cuStreamDestroy_v2(stream));
  EXPECT_EQ(cuStreamQuery(stream), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_CU(cuEventSynchronize(done));
  EXPECT_CU(cuEventQuery(done));
}

}  // namespace
}  // namespace fakecuda::test
