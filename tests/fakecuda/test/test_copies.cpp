// Strided, array and peer copies, 2D fills, peer access, unified-memory
// hints and stream memory operations: every copy really moves bytes.
#include <numeric>
#include <vector>

#include "support.h"

namespace fakecuda::test {
namespace {

constexpr size_t kMiB = 1ull << 20;

std::vector<unsigned char> pattern(size_t n) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<unsigned char>(i * 7 + 3);
  return v;
}

TEST(Copies, TwoDimensionalCopiesHonourPitchesAndOffsets) {
  init_primary(0);
  // A 16x8 block out of a 32-byte-pitch host image, into device rows of 64.
  const auto image = pattern(32 * 10);
  CUdeviceptr dev = 0;
  ASSERT_CU(cuMemAlloc_v2(&dev, 64 * 10));
  ASSERT_CU(cuMemsetD8_v2(dev, 0, 64 * 10));
  CUDA_MEMCPY2D up{};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = image.data();
  up.srcPitch = 32;
  up.srcXInBytes = 4;
  up.srcY = 1;
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  up.dstDevice = dev;
  up.dstPitch = 64;
  up.dstXInBytes = 8;
  up.dstY = 2;
  up.WidthInBytes = 16;
  up.Height = 8;
  ASSERT_CU(cuMemcpy2D_v2(&up));
  std::vector<unsigned char> back(64 * 10);
  ASSERT_CU(cuMemcpyDtoH_v2(back.data(), dev, back.size()));
  for (size_t y = 0; y < 10; ++y)
    for (size_t x = 0; x < 64; ++x) {
      const bool inside = y >= 2 && y < 10 && x >= 8 && x < 24;
      const unsigned char want = inside ? image[(y - 2 + 1) * 32 + (x - 8 + 4)] : 0;
      ASSERT_EQ(back[y * 64 + x], want) << "at " << x << "," << y;
    }

  // Unaligned and asynchronous forms move the same bytes.
  std::vector<unsigned char> down(16 * 8, 0);
  CUDA_MEMCPY2D d2h{};
  d2h.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  d2h.srcDevice = dev + 2 * 64 + 8;
  d2h.srcPitch = 64;
  d2h.dstMemoryType = CU_MEMORYTYPE_HOST;
  d2h.dstHost = down.data();
  d2h.dstPitch = 16;
  d2h.WidthInBytes = 16;
  d2h.Height = 8;
  ASSERT_CU(cuMemcpy2DUnaligned_v2(&d2h));
  EXPECT_EQ(down[17], image[2 * 32 + 5]);
  std::fill(down.begin(), down.end(), 0);
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuMemcpy2DAsync_v2(&d2h, s));
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(down[17], image[2 * 32 + 5]);

  // What the real driver refuses.
  CUDA_MEMCPY2D bad = up;
  bad.srcPitch = 16;  // < WidthInBytes + srcXInBytes
  EXPECT_EQ(cuMemcpy2D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = up;
  bad.dstPitch = 4ull << 30;
  EXPECT_EQ(cuMemcpy2D_v2(&bad), CUDA_ERROR_INVALID_VALUE) << "beyond MAX_PITCH";
  bad = up;
  bad.srcMemoryType = static_cast<CUmemorytype>(9);
  EXPECT_EQ(cuMemcpy2D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpy2D_v2(nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuStreamDestroy_v2(s));
  ASSERT_CU(cuMemFree_v2(dev));
}

TEST(Copies, AsynchronousCopiesRunInStreamOrder) {
  init_primary(0);
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAlloc_v2(&a, 4096));
  ASSERT_CU(cuMemAlloc_v2(&b, 4096));
  unsigned* flag = nullptr;
  ASSERT_CU(cuMemAllocHost_v2(reinterpret_cast<void**>(&flag), 4));
  *flag = 0;
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  // Held until the flag is set: the fill and the copy behind it wait.
  ASSERT_CU(
      cuStreamWaitValue32_v2(s, reinterpret_cast<CUdeviceptr>(flag), 1, CU_STREAM_WAIT_VALUE_GEQ));
  ASSERT_CU(cuMemsetD2D32Async(a, 64, 0xabcdef01u, 16, 64, s));
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = a;
  c.srcPitch = 64;
  c.srcHeight = 64;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = b;
  c.dstPitch = 64;
  c.dstHeight = 64;
  c.WidthInBytes = 64;
  c.Height = 64;
  c.Depth = 1;
  ASSERT_CU(cuMemcpy3DAsync_v2(&c, s));
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  unsigned word = 1;
  ASSERT_CU(cuMemcpyDtoH_v2(&word, b, 4));
  EXPECT_EQ(word, 0u) << "nothing ran yet";
  __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
  ASSERT_CU(cuStreamSynchronize(s));
  ASSERT_CU(cuMemcpyDtoH_v2(&word, b + 64 * 63 + 60, 4));
  EXPECT_EQ(word, 0xabcdef01u);
  ASSERT_CU(cuStreamDestroy_v2(s));
  ASSERT_CU(cuMemFreeHost(flag));
  ASSERT_CU(cuMemFree_v2(a));
  ASSERT_CU(cuMemFree_v2(b));
}

TEST(Copies, ArraysHoldWhatIsCopiedIn) {
  init_primary(0);
  // A 3D array of 8x4x3 float2 (8 bytes an element).
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  desc.Width = 8;
  desc.Height = 4;
  desc.Depth = 3;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 2;
  CUarray array = nullptr;
  ASSERT_CU(cuArray3DCreate_v2(&array, &desc));
  const size_t row = 8 * 8;
  const auto volume = pattern(row * 4 * 3);
  CUDA_MEMCPY3D in{};
  in.srcMemoryType = CU_MEMORYTYPE_HOST;
  in.srcHost = volume.data();
  in.srcPitch = row;
  in.srcHeight = 4;
  in.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  in.dstArray = array;
  in.WidthInBytes = row;
  in.Height = 4;
  in.Depth = 3;
  ASSERT_CU(cuMemcpy3D_v2(&in));

  // Out again, one slice and a sub-block, into device memory and back.
  CUdeviceptr dev = 0;
  ASSERT_CU(cuMemAlloc_v2(&dev, 16 * 2));
  CUDA_MEMCPY3D out{};
  out.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  out.srcArray = array;
  out.srcXInBytes = 16;
  out.srcY = 1;
  out.srcZ = 2;
  out.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  out.dstDevice = dev;
  out.dstPitch = 16;
  out.WidthInBytes = 16;
  out.Height = 2;
  out.Depth = 1;
  ASSERT_CU(cuMemcpy3D_v2(&out));
  std::vector<unsigned char> back(32);
  ASSERT_CU(cuMemcpyDtoH_v2(back.data(), dev, back.size()));
  for (size_t y = 0; y < 2; ++y)
    for (size_t x = 0; x < 16; ++x)
      ASSERT_EQ(back[y * 16 + x], volume[2 * row * 4 + (1 + y) * row + 16 + x]);

  CUDA_MEMCPY3D bad = out;
  bad.srcXInBytes = 12;  // not a whole element
  EXPECT_EQ(cuMemcpy3D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = out;
  bad.srcZ = 3;  // past the last slice
  EXPECT_EQ(cuMemcpy3D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = out;
  bad.srcLOD = 1;
  EXPECT_EQ(cuMemcpy3D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = out;
  bad.reserved0 = &bad;
  EXPECT_EQ(cuMemcpy3D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuArrayDestroy(array));
  EXPECT_EQ(cuMemcpy3D_v2(&out), CUDA_ERROR_INVALID_HANDLE) << "a destroyed array";

  // 2D copies take arrays too.
  CUDA_ARRAY_DESCRIPTOR flat{};
  flat.Width = 16;
  flat.Height = 2;
  flat.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  flat.NumChannels = 1;
  ASSERT_CU(cuArrayCreate_v2(&array, &flat));
  CUDA_MEMCPY2D d2a{};
  d2a.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  d2a.srcDevice = dev;
  d2a.srcPitch = 16;
  d2a.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  d2a.dstArray = array;
  d2a.WidthInBytes = 16;
  d2a.Height = 2;
  ASSERT_CU(cuMemcpy2D_v2(&d2a));
  std::vector<unsigned char> again(32);
  CUDA_MEMCPY2D a2h{};
  a2h.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  a2h.srcArray = array;
  a2h.dstMemoryType = CU_MEMORYTYPE_HOST;
  a2h.dstHost = again.data();
  a2h.dstPitch = 16;
  a2h.WidthInBytes = 16;
  a2h.Height = 2;
  ASSERT_CU(cuMemcpy2D_v2(&a2h));
  EXPECT_EQ(again, back);
  ASSERT_CU(cuArrayDestroy(array));
  ASSERT_CU(cuMemFree_v2(dev));
}

TEST(Copies, PeerCopiesBetweenContextsOfTwoDevices) {
  CUcontext zero = init_primary(0);
  CUdeviceptr src = 0;
  const auto bytes = pattern(8192);
  ASSERT_CU(cuMemAlloc_v2(&src, bytes.size()));
  ASSERT_CU(cuMemcpyHtoD_v2(src, bytes.data(), bytes.size()));
  CUcontext one = init_primary(1);
  CUdeviceptr dst = 0;
  ASSERT_CU(cuMemAlloc_v2(&dst, bytes.size()));
  ASSERT_CU(cuMemcpyPeer(dst, one, src, zero, 4096));
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, 0));
  ASSERT_CU(cuMemcpyPeerAsync(dst + 4096, one, src + 4096, zero, 4096, s));
  ASSERT_CU(cuStreamSynchronize(s));
  std::vector<unsigned char> back(bytes.size());
  ASSERT_CU(cuMemcpyDtoH_v2(back.data(), dst, back.size()));
  EXPECT_EQ(back, bytes);

  CUDA_MEMCPY3D_PEER p{};
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = dst;
  p.srcContext = one;
  p.srcPitch = 64;
  p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p.dstDevice = src;
  p.dstContext = zero;
  p.dstPitch = 64;
  p.WidthInBytes = 32;
  p.Height = 4;
  p.Depth = 1;
  ASSERT_CU(cuMemsetD8_v2(dst, 0xee, 64 * 4));
  ASSERT_CU(cuMemcpy3DPeer(&p));
  ASSERT_CU(cuMemcpy3DPeerAsync(&p, s));
  ASSERT_CU(cuStreamSynchronize(s));
  ASSERT_CU(cuMemcpyDtoH_v2(back.data(), src, 64 * 4));
  EXPECT_EQ(back[64 * 3 + 31], 0xee);
  EXPECT_EQ(back[64 * 3 + 32], bytes[64 * 3 + 32]) << "outside the copied width";

  EXPECT_EQ(cuMemcpyPeer(dst, nullptr, src, zero, 16), CUDA_ERROR_INVALID_CONTEXT);
  p.srcContext = nullptr;
  EXPECT_EQ(cuMemcpy3DPeer(&p), CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_CU(cuStreamDestroy_v2(s));
  ASSERT_CU(cuMemFree_v2(dst));
  ASSERT_CU(cuCtxSetCurrent(zero));
  ASSERT_CU(cuMemFree_v2(src));
}

TEST(Copies, TwoDimensionalFillsStayInsideTheirRows) {
  init_primary(0);
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc_v2(&p, 256 * 4));
  ASSERT_CU(cuMemsetD8_v2(p, 0, 256 * 4));
  ASSERT_CU(cuMemsetD2D8_v2(p, 256, 0x11, 10, 4));
  ASSERT_CU(cuMemsetD2D16_v2(p + 16, 256, 0x2222, 4, 4));
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, 0));
  ASSERT_CU(cuMemsetD2D32Async(p + 32, 256, 0x33333333u, 2, 4, s));
  ASSERT_CU(cuMemsetD2D8Async(p + 48, 256, 0x44, 3, 4, s));
  ASSERT_CU(cuStreamSynchronize(s));
  std::vector<unsigned char> back(256 * 4);
  ASSERT_CU(cuMemcpyDtoH_v2(back.data(), p, back.size()));
  for (size_t row = 0; row < 4; ++row) {
    const unsigned char* r = &back[row * 256];
    EXPECT_EQ(r[9], 0x11);
    EXPECT_EQ(r[10], 0);
    EXPECT_EQ(r[23], 0x22);
    EXPECT_EQ(r[24], 0);
    EXPECT_EQ(r[39], 0x33);
    EXPECT_EQ(r[40], 0);
    EXPECT_EQ(r[50], 0x44);
    EXPECT_EQ(r[51], 0);
  }
  EXPECT_EQ(cuMemsetD2D8_v2(p, 8, 0, 10, 2), CUDA_ERROR_INVALID_VALUE) << "pitch below width";
  EXPECT_EQ(cuMemsetD2D32_v2(p + 2, 256, 0, 1, 1), CUDA_ERROR_INVALID_VALUE) << "misaligned";
  ASSERT_CU(cuStreamDestroy_v2(s));
  ASSERT_CU(cuMemFree_v2(p));
}

TEST(PeerAccess, EnableAndDisableWithTheRealErrors) {
  CUcontext zero = init_primary(0);
  CUcontext one = init_primary(1);
  ASSERT_CU(cuCtxSetCurrent(zero));
  EXPECT_EQ(cuCtxDisablePeerAccess(one), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  EXPECT_EQ(cuCtxEnablePeerAccess(one, 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuCtxEnablePeerAccess(one, 0));
  EXPECT_EQ(cuCtxEnablePeerAccess(one, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  EXPECT_EQ(cuCtxEnablePeerAccess(zero, 0), CUDA_ERROR_INVALID_CONTEXT) << "itself";
  EXPECT_EQ(cuCtxEnablePeerAccess(nullptr, 0), CUDA_ERROR_INVALID_CONTEXT);
  // A second context of the same device is no peer.
  CUcontext another = nullptr;
  ASSERT_CU(cuCtxCreate_v2(&another, 0, 0));
  EXPECT_EQ(cuCtxEnablePeerAccess(zero, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
  ASSERT_CU(cuCtxDestroy_v2(another));
  ASSERT_CU(cuCtxSetCurrent(zero));
  // Access is one way.
  ASSERT_CU(cuCtxSetCurrent(one));
  EXPECT_EQ(cuCtxDisablePeerAccess(zero), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  ASSERT_CU(cuCtxSetCurrent(zero));
  ASSERT_CU(cuCtxDisablePeerAccess(one));
  EXPECT_EQ(cuCtxDisablePeerAccess(one), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  ASSERT_CU(cuCtxSetCurrent(nullptr));
  EXPECT_EQ(cuCtxEnablePeerAccess(one, 0), CUDA_ERROR_INVALID_CONTEXT) << "no current context";
}

TEST(PeerAccess, LinkAttributes) {
  ASSERT_CU(cuInit(0));
  int value = -1;
  ASSERT_CU(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 1));
  EXPECT_EQ(value, 1);
  ASSERT_CU(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, 1, 0));
  EXPECT_EQ(value, 0);
  EXPECT_EQ(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 0),
            CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 2),
            CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGetP2PAttribute(nullptr, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 1),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetP2PAttribute(&value, static_cast<CUdevice_P2PAttribute>(42), 0, 1),
            CUDA_ERROR_INVALID_VALUE);
}

TEST(UnifiedMemory, AdviceAndPrefetchesShowInTheRangeAttributes) {
  init_primary(0);
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAllocManaged(&p, 4 * kMiB, CU_MEM_ATTACH_GLOBAL));
  int value = 0;
  ASSERT_CU(
      cuMemRangeGetAttribute(&value, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, kMiB));
  EXPECT_EQ(value, CU_DEVICE_INVALID) << "never prefetched";
  ASSERT_CU(cuMemPrefetchAsync(p, kMiB, 1, nullptr));
  ASSERT_CU(
      cuMemRangeGetAttribute(&value, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, kMiB));
  EXPECT_EQ(value, 1);
  CUmemLocation host{CU_MEM_LOCATION_TYPE_HOST, 0};
  ASSERT_CU(cuMemPrefetchAsync_v2(p, kMiB, host, 0, nullptr));
  ASSERT_CU(
      cuMemRangeGetAttribute(&value, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, kMiB));
  EXPECT_EQ(value, CU_DEVICE_CPU);

  ASSERT_CU(cuMemAdvise(p, kMiB, CU_MEM_ADVISE_SET_READ_MOSTLY, 0));
  ASSERT_CU(cuMemAdvise_v2(p, kMiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
                           CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, 1}));
  ASSERT_CU(cuMemAdvise(p, kMiB, CU_MEM_ADVISE_SET_ACCESSED_BY, 1));
  int read_mostly = 0, preferred = 0, type = 0;
  int accessed[3] = {};
  void* data[] = {&read_mostly, &preferred, &type, accessed};
  size_t sizes[] = {4, 4, 4, sizeof accessed};
  CUmem_range_attribute attributes[] = {
      CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
      CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY};
  ASSERT_CU(cuMemRangeGetAttributes(data, sizes, attributes, 4, p, 4 * kMiB));
  EXPECT_EQ(read_mostly, 1);
  EXPECT_EQ(preferred, 1);
  EXPECT_EQ(type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(accessed[0], 1);
  EXPECT_EQ(accessed[1], CU_DEVICE_INVALID);
  ASSERT_CU(cuMemAdvise(p, kMiB, CU_MEM_ADVISE_UNSET_READ_MOSTLY, 0));
  ASSERT_CU(cuMemRangeGetAttribute(&value, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, kMiB));
  EXPECT_EQ(value, 0);

  // Only managed memory, whole ranges, known devices, right sizes.
  CUdeviceptr linear = 0;
  ASSERT_CU(cuMemAlloc_v2(&linear, kMiB));
  EXPECT_EQ(cuMemPrefetchAsync(linear, kMiB, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAdvise(linear, kMiB, CU_MEM_ADVISE_SET_READ_MOSTLY, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(p, 8 * kMiB, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(p, kMiB, 7, nullptr), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuMemPrefetchAsync_v2(p, kMiB, host, 1, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAdvise(p, kMiB, static_cast<CUmem_advise>(9), 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemRangeGetAttribute(&value, 8, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, kMiB),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuMemFree_v2(linear));
  ASSERT_CU(cuMemFree_v2(p));
}

TEST(StreamMemOps, WritesAndWaitsOrderTwoStreams) {
  init_primary(0);
  CUdeviceptr word = 0;
  ASSERT_CU(cuMemAlloc_v2(&word, 64));
  ASSERT_CU(cuMemsetD8_v2(word, 0, 64));
  CUstream waiter = nullptr, writer = nullptr;
  ASSERT_CU(cuStreamCreate(&waiter, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamCreate(&writer, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamWaitValue64_v2(waiter, word + 8, 5, CU_STREAM_WAIT_VALUE_EQ));
  ASSERT_CU(cuStreamWriteValue32_v2(waiter, word + 16, 0x77, 0));
  EXPECT_EQ(cuStreamQuery(waiter), CUDA_ERROR_NOT_READY);
  ASSERT_CU(cuStreamWriteValue64_v2(writer, word + 8, 4, 0));
  ASSERT_CU(cuStreamSynchronize(writer));
  EXPECT_EQ(cuStreamQuery(waiter), CUDA_ERROR_NOT_READY) << "4 is not 5";
  ASSERT_CU(cuStreamWriteValue64(writer, word + 8, 5, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER));
  ASSERT_CU(cuStreamSynchronize(waiter));
  unsigned got = 0;
  ASSERT_CU(cuMemcpyDtoH_v2(&got, word + 16, 4));
  EXPECT_EQ(got, 0x77u);

  // A batch: a write, a wait it satisfies, a barrier, then a write.
  CUstreamBatchMemOpParams ops[4] = {};
  ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[0].writeValue.address = word + 24;
  ops[0].writeValue.value = 9;
  ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[1].waitValue.address = word + 24;
  ops[1].waitValue.value = 8;
  ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  ops[2].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
  ops[3].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  ops[3].writeValue.address = word + 32;
  ops[3].writeValue.value64 = 0x1122334455667788ull;
  ASSERT_CU(cuStreamBatchMemOp_v2(waiter, 4, ops, 0));
  ASSERT_CU(cuStreamSynchronize(waiter));
  unsigned long long wide = 0;
  ASSERT_CU(cuMemcpyDtoH_v2(&wide, word + 32, 8));
  EXPECT_EQ(wide, 0x1122334455667788ull);

  // What the real driver refuses.
  EXPECT_EQ(cuStreamWaitValue32_v2(waiter, word + 2, 0, 0), CUDA_ERROR_INVALID_VALUE)
      << "misaligned";
  EXPECT_EQ(cuStreamWaitValue32_v2(waiter, word, 0, 0x10), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamWriteValue32_v2(waiter, word, 0, 0x2), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamWriteValue32_v2(waiter, 0x1000, 0, 0), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr managed = 0;
  ASSERT_CU(cuMemAllocManaged(&managed, 64, CU_MEM_ATTACH_GLOBAL));
  EXPECT_EQ(cuStreamWriteValue32_v2(waiter, managed, 0, 0), CUDA_ERROR_INVALID_VALUE);
  ops[0].operation = static_cast<CUstreamBatchMemOpType>(42);
  EXPECT_EQ(cuStreamBatchMemOp_v2(waiter, 4, ops, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamBatchMemOp_v2(waiter, 0, ops, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFree_v2(managed));
  ASSERT_CU(cuStreamDestroy_v2(waiter));
  ASSERT_CU(cuStreamDestroy_v2(writer));
  ASSERT_CU(cuMemFree_v2(word));
}

TEST(StreamMemOps, WaitConditions) {
  init_primary(0);
  unsigned* flag = nullptr;
  ASSERT_CU(cuMemAllocHost_v2(reinterpret_cast<void**>(&flag), 8));
  const auto addr = reinterpret_cast<CUdeviceptr>(flag);
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  struct Case {
    unsigned memory, value, condition;
    bool holds;
  } cases[] = {
      {5, 5, CU_STREAM_WAIT_VALUE_GEQ, true},
      {4, 5, CU_STREAM_WAIT_VALUE_GEQ, false},
      {1, 0xffffffffu, CU_STREAM_WAIT_VALUE_GEQ, true},  // cyclic
      {6, 6, CU_STREAM_WAIT_VALUE_EQ, true},
      {6, 7, CU_STREAM_WAIT_VALUE_EQ, false},
      {6, 2, CU_STREAM_WAIT_VALUE_AND, true},
      {6, 1, CU_STREAM_WAIT_VALUE_AND, false},
      {0, 0, CU_STREAM_WAIT_VALUE_NOR, true},
      {0xffffffffu, 0, CU_STREAM_WAIT_VALUE_NOR, false},
  };
  for (const Case& c : cases) {
    __atomic_store_n(flag, c.memory, __ATOMIC_RELEASE);
    ASSERT_CU(cuStreamWaitValue32_v2(s, addr, c.value, c.condition));
    ASSERT_CU(cuStreamWriteValue32_v2(s, addr + 4, 1, 0));
    if (c.holds) {
      ASSERT_CU(cuStreamSynchronize(s)) << c.memory << " " << c.value << " " << c.condition;
    } else {
      EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY)
          << c.memory << " " << c.value << " " << c.condition;
      // Release it: EQ/GEQ/AND with the value itself, NOR with zeros.
      const unsigned release = c.condition == CU_STREAM_WAIT_VALUE_NOR ? 0 : c.value;
      __atomic_store_n(flag, release, __ATOMIC_RELEASE);
      ASSERT_CU(cuStreamSynchronize(s));
    }
  }
  ASSERT_CU(cuStreamDestroy_v2(s));
  ASSERT_CU(cuMemFreeHost(flag));
}

}  // namespace
}  // namespace fakecuda::test
