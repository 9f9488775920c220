// The driver's private tables that NVIDIA's CUDA runtime fetches through
// cuGetExportTable (src/export_tables.cpp).
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "md2.h"
#include "support.h"

namespace fakecuda::test {
namespace {

CUuuid uuid(const char* hex) {
  CUuuid id{};
  for (int i = 0; i < 16; ++i) {
    unsigned byte = 0;
    std::sscanf(hex + 2 * i, "%2x", &byte);
    id.bytes[i] = static_cast<char>(byte);
  }
  return id;
}

constexpr const char* kCudart = "6bd5fb6c5bf4e74a8987d93912fd9df9";
constexpr const char* kHooks = "a094798c2e742e7493f20800200c0a66";
constexpr const char* kToolsTls = "42d85a8123f6cb478298f6e78a3aecdc";
constexpr const char* kStorage = "c693336e1121df11a8c368f355d89593";
constexpr const char* kChecks = "263e88607cd2614392f6bbd5006dfa7e";
constexpr const char* kIntegrity = "d4082055bde6704b8d34ba123c66e1f2";
constexpr const char* kToolsContext = "21318c60971432488ca641ff7324c8f2";
constexpr const char* kMatmul = "1734dc26800d47458726c0f1e7dd8bca";

const void* const* table(const char* hex) {
  const void* t = nullptr;
  const CUuuid id = uuid(hex);
  EXPECT_EQ(cuGetExportTable(&t, &id), CUDA_SUCCESS) << hex;
  return static_cast<const void* const*>(t);
}

template <class Fn>
Fn slot(const char* hex, size_t index) {
  return reinterpret_cast<Fn>(const_cast<void*>(table(hex)[index]));
}

using PrimaryContextFn = CUresult (*)(CUcontext*, CUdevice);
using Destructor = void (*)(CUcontext, void*, void*);
using PutFn = CUresult (*)(CUcontext, void*, void*, Destructor);
using DeleteFn = CUresult (*)(CUcontext, void*);
using GetFn = CUresult (*)(void**, CUcontext, void*);
using NoArgumentsFn = CUresult (*)();

PutFn put() {
  return slot<PutFn>(kStorage, 0);
}
DeleteFn remove() {
  return slot<DeleteFn>(kStorage, 1);
}
GetFn get() {
  return slot<GetFn>(kStorage, 2);
}

void* key(int i) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(0x1000 + i));
}
void* value(int i) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(0x2000 + i));
}

// What destructors were called with.
struct Call {
  CUcontext ctx;
  void* key;
  void* value;
  bool context_usable;  // the driver still knew the context during the call
};
std::vector<Call> calls;

void record(CUcontext ctx, void* k, void* v) {
  // Calls back into the driver, as the runtime's destructor does.
  unsigned long long id = 0;
  calls.push_back({ctx, k, v, cuCtxGetId(ctx, &id) == CUDA_SUCCESS});
}

class ExportTables : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CU(cuInit(0));
    calls.clear();
  }
};

TEST_F(ExportTables, EveryKnownTableHasItsSizeAndNoEmptySlot) {
  const struct {
    const char* id;
    size_t slots;
  } sized[] = {{kCudart, 13},   {kHooks, 7},         {kToolsTls, 4}, {kChecks, 4},
               {kIntegrity, 3}, {kToolsContext, 93}, {kMatmul, 32}};
  for (const auto& t : sized) {
    const void* const* slots = table(t.id);
    ASSERT_NE(slots, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(slots[0]), t.slots * sizeof(void*)) << t.id;
    for (size_t i = 1; i < t.slots; ++i)
      EXPECT_NE(slots[i], nullptr) << t.id << " slot " << i;
  }
  // Context-local storage has no size word.
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NE(table(kStorage)[i], nullptr);
  // The same table each time, in the driver's own image (interposers ask).
  EXPECT_EQ(table(kCudart), table(kCudart));
  Dl_info info{};
  ASSERT_NE(dladdr(table(kCudart), &info), 0);
  EXPECT_NE(std::strstr(info.dli_fname, "libcuda.so.1"), nullptr) << info.dli_fname;
}

TEST_F(ExportTables, OtherTablesAreRefused) {
  for (const char* hex : {"f8cff95121468b4eb9e2fb469e7c0dd9", "00000000000000000000000000000000",
                          "0ca50b8c1004929a89a7d0df10e77286"}) {
    const void* t = reinterpret_cast<const void*>(1);
    const CUuuid id = uuid(hex);
    EXPECT_EQ(cuGetExportTable(&t, &id), CUDA_ERROR_INVALID_VALUE) << hex;
    EXPECT_EQ(t, nullptr) << hex;
  }
  const CUuuid id = uuid(kCudart);
  EXPECT_EQ(cuGetExportTable(nullptr, &id), CUDA_ERROR_INVALID_VALUE);
  const void* t = nullptr;
  EXPECT_EQ(cuGetExportTable(&t, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ExportTables, SlotsNobodyCallsReturnAnError) {
  EXPECT_EQ(slot<NoArgumentsFn>(kCudart, 3)(), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(slot<NoArgumentsFn>(kToolsTls, 1)(), CUDA_ERROR_NOT_SUPPORTED);
  // cuBLASLt calls these two without checking them (tests/fakecuda/README.md).
  EXPECT_EQ(slot<NoArgumentsFn>(kMatmul, 4)(), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(slot<NoArgumentsFn>(kMatmul, 13)(), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(slot<NoArgumentsFn>(kToolsContext, 92)(), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(slot<NoArgumentsFn>(kCudart, 12)(), CUDA_SUCCESS);  // "load compilers"
}

TEST_F(ExportTables, PrimaryContextIsHandedOutWithoutActivatingIt) {
  ASSERT_CU(cuDevicePrimaryCtxReset_v2(1));
  CUcontext handle = nullptr;
  const auto primary_context = slot<PrimaryContextFn>(kCudart, 2);
  ASSERT_CU(primary_context(&handle, 1));
  ASSERT_NE(handle, nullptr);
  unsigned flags = 0;
  int active = 1;
  ASSERT_CU(cuDevicePrimaryCtxGetState(1, &flags, &active));
  EXPECT_EQ(active, 0);
  // Not usable until retained, but it is the handle the retain gives.
  EXPECT_EQ(cuCtxPushCurrent_v2(handle), CUDA_ERROR_INVALID_CONTEXT);
  CUcontext retained = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&retained, 1));
  EXPECT_EQ(retained, handle);
  unsigned long long first_id = 0, second_id = 0;
  ASSERT_CU(cuCtxGetId(retained, &first_id));
  // A reset keeps the handle; the context behind it is a new one.
  ASSERT_CU(cuDevicePrimaryCtxReset_v2(1));
  ASSERT_CU(cuDevicePrimaryCtxRetain(&retained, 1));
  EXPECT_EQ(retained, handle);
  ASSERT_CU(cuCtxGetId(retained, &second_id));
  EXPECT_NE(first_id, second_id);
  ASSERT_CU(cuDevicePrimaryCtxRelease_v2(1));

  EXPECT_EQ(primary_context(nullptr, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(primary_context(&handle, 2), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(ExportTables, InactivePrimaryContextCanBeMadeCurrent) {
  ASSERT_CU(cuDevicePrimaryCtxReset_v2(1));
  CUcontext handle = nullptr;
  ASSERT_CU(slot<PrimaryContextFn>(kCudart, 2)(&handle, 1));
  ASSERT_CU(cuCtxSetCurrent(handle));
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc_v2(&p, 1 << 20), CUDA_ERROR_INVALID_CONTEXT);
  CUcontext retained = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&retained, 1));
  ASSERT_CU(cuMemAlloc_v2(&p, 1 << 20));
  ASSERT_CU(cuMemFree_v2(p));
  ASSERT_CU(cuCtxSetCurrent(nullptr));
  ASSERT_CU(cuDevicePrimaryCtxRelease_v2(1));
}

TEST_F(ExportTables, StoragePutGetDelete) {
  CUcontext ctx = nullptr;
  ASSERT_CU(cuCtxCreate_v2(&ctx, 0, 0));
  void* v = nullptr;
  EXPECT_EQ(get()(&v, ctx, key(1)), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_CU(put()(ctx, key(1), value(1), nullptr));
  ASSERT_CU(get()(&v, ctx, key(1)));
  EXPECT_EQ(v, value(1));
  // NULL is the current context (cuCtxCreate made it current).
  v = nullptr;
  ASSERT_CU(get()(&v, nullptr, key(1)));
  EXPECT_EQ(v, value(1));
  ASSERT_CU(put()(nullptr, key(2), value(2), nullptr));
  ASSERT_CU(get()(&v, ctx, key(2)));
  EXPECT_EQ(v, value(2));
  // Put again replaces.
  ASSERT_CU(put()(ctx, key(1), value(3), nullptr));
  ASSERT_CU(get()(&v, ctx, key(1)));
  EXPECT_EQ(v, value(3));
  ASSERT_CU(remove()(ctx, key(1)));
  EXPECT_EQ(get()(&v, ctx, key(1)), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(remove()(ctx, key(1)), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_CU(get()(&v, ctx, key(2)));
  EXPECT_EQ(get()(nullptr, ctx, key(2)), CUDA_ERROR_INVALID_VALUE);
  // Values are per context.
  CUcontext other = nullptr;
  ASSERT_CU(cuCtxCreate_v2(&other, 0, 0));
  EXPECT_EQ(get()(&v, other, key(2)), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_CU(cuCtxDestroy_v2(other));
  ASSERT_CU(cuCtxDestroy_v2(ctx));
  EXPECT_EQ(put()(ctx, key(1), value(1), nullptr), CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_CU(cuCtxSetCurrent(nullptr));
  EXPECT_EQ(get()(&v, nullptr, key(1)), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(ExportTables, StorageHoldsManyKeys) {
  CUcontext ctx = nullptr;
  ASSERT_CU(cuCtxCreate_v2(&ctx, 0, 0));
  for (int i = 0; i < 100; ++i)
    ASSERT_CU(put()(ctx, key(i), value(i), nullptr));
  for (int i = 0; i < 100; i += 2)
    ASSERT_CU(remove()(ctx, key(i)));
  for (int i = 0; i < 100; ++i) {
    void* v = nullptr;
    const CUresult r = get()(&v, ctx, key(i));
    if (i % 2) {
      EXPECT_CU(r);
      EXPECT_EQ(v, value(i));
    } else {
      EXPECT_EQ(r, CUDA_ERROR_INVALID_HANDLE);
    }
  }
  ASSERT_CU(cuCtxDestroy_v2(ctx));
}

TEST_F(ExportTables, DestructorsRunAtContextDestroy) {
  CUcontext ctx = nullptr;
  ASSERT_CU(cuCtxCreate_v2(&ctx, 0, 0));
  ASSERT_CU(put()(ctx, key(1), value(1), record));
  ASSERT_CU(put()(ctx, key(2), value(2), record));
  ASSERT_CU(remove()(ctx, key(2)));  // forgotten: its destructor does not run
  EXPECT_TRUE(calls.empty());
  ASSERT_CU(cuCtxDestroy_v2(ctx));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].ctx, ctx);
  EXPECT_EQ(calls[0].key, key(1));
  EXPECT_EQ(calls[0].value, value(1));
  EXPECT_TRUE(calls[0].context_usable);
}

TEST_F(ExportTables, DestructorsRunAtPrimaryResetAndLastRelease) {
  ASSERT_CU(cuDevicePrimaryCtxReset_v2(1));
  CUcontext ctx = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx, 1));
  ASSERT_CU(put()(ctx, key(1), value(1), record));
  ASSERT_CU(cuDevicePrimaryCtxReset_v2(1));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].ctx, ctx);
  EXPECT_EQ(calls[0].value, value(1));
  EXPECT_TRUE(calls[0].context_usable);
  void* v = nullptr;
  EXPECT_EQ(get()(&v, ctx, key(1)), CUDA_ERROR_INVALID_HANDLE);

  ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx, 1));
  ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx, 1));
  ASSERT_CU(put()(ctx, key(2), value(2), record));
  ASSERT_CU(cuDevicePrimaryCtxRelease_v2(1));
  EXPECT_EQ(calls.size(), 1u);  // still retained once
  ASSERT_CU(cuDevicePrimaryCtxRelease_v2(1));
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].key, key(2));
  EXPECT_TRUE(calls[1].context_usable);
}

TEST_F(ExportTables, StorageOfAnInactivePrimaryContext) {
  ASSERT_CU(cuDevicePrimaryCtxReset_v2(1));
  CUcontext handle = nullptr;
  ASSERT_CU(slot<PrimaryContextFn>(kCudart, 2)(&handle, 1));
  ASSERT_CU(put()(handle, key(1), value(1), record));
  void* v = nullptr;
  ASSERT_CU(get()(&v, handle, key(1)));
  EXPECT_EQ(v, value(1));
  CUcontext ctx = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx, 1));
  ASSERT_CU(get()(&v, ctx, key(1)));
  ASSERT_CU(cuDevicePrimaryCtxRelease_v2(1));
  EXPECT_EQ(calls.size(), 1u);
}

// The driver answers the runtime's integrity check: fixed answers for
// versions ending in 0 or 1, otherwise HMAC-MD2 of the documented fields.
using IntegrityFn = CUresult (*)(uint32_t, uint64_t, uint64_t*);

TEST_F(ExportTables, IntegrityCheckFixedAnswers) {
  const auto check = slot<IntegrityFn>(kIntegrity, 1);
  uint64_t out[2] = {};
  ASSERT_CU(check(13000, 1700000000, out));
  EXPECT_EQ(out[0], 0x3341181c03cb675cull);
  EXPECT_EQ(out[1], 0x8ed383aa1f4cd1e8ull);
  ASSERT_CU(check(13001, 1, out));
  EXPECT_EQ(out[0], 0x1841181c03cb675cull);
  EXPECT_EQ(out[1], 0x8ed383aa1f4cd1e8ull);
  ASSERT_CU(check(12090, 5, out));
  EXPECT_EQ(out[0], 0x3341181c03cb675cull);
  EXPECT_EQ(check(13002, 1, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ExportTables, IntegrityCheckKeyedHash) {
  const auto check = slot<IntegrityFn>(kIntegrity, 1);
  const uint64_t now = 0x682b9cee;
  uint64_t out[2] = {};
  ASSERT_CU(check(13002, now, out));

  int driver_version = 0;
  ASSERT_CU(cuDriverGetVersion(&driver_version));
  struct {
    uint32_t driver_version, version, process, thread;
    const void *cudart_table, *integrity_table, *function;
    uint64_t unix_seconds;
  } header = {static_cast<uint32_t>(driver_version),
              13002,
              static_cast<uint32_t>(getpid()),
              static_cast<uint32_t>(reinterpret_cast<uintptr_t>(pthread_self())),
              table(kCudart),
              table(kIntegrity),
              table(kIntegrity)[1],
              now};
  static_assert(sizeof(header) == 48);
  const uint8_t key[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                           0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};
  HmacMd2 mac(key, sizeof(key));
  mac.update(&header, sizeof(header));
  int count = 0;
  ASSERT_CU(cuDeviceGetCount(&count));
  ASSERT_EQ(count, 2);
  for (CUdevice dev = 0; dev < count; ++dev) {
    struct {
      CUuuid uuid;
      int domain, bus, device;
    } device{};
    static_assert(sizeof(device) == 28);
    ASSERT_CU(cuDeviceGetUuid_v2(&device.uuid, dev));
    ASSERT_CU(cuDeviceGetAttribute(&device.domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev));
    ASSERT_CU(cuDeviceGetAttribute(&device.bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev));
    ASSERT_CU(cuDeviceGetAttribute(&device.device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev));
    mac.update(&device, sizeof(device));
  }
  const Md2Digest expected = mac.finish();
  EXPECT_EQ(std::memcmp(out, expected.data(), sizeof(out)), 0);

  // Every input counts: another second, another version.
  uint64_t later[2] = {}, other[2] = {};
  ASSERT_CU(check(13002, now + 1, later));
  ASSERT_CU(check(13003, now, other));
  EXPECT_NE(std::memcmp(out, later, sizeof(out)), 0);
  EXPECT_NE(std::memcmp(out, other, sizeof(out)), 0);
}

TEST_F(ExportTables, ContextChecksAnswerZero) {
  init_primary(0);
  uint32_t flags = 0xdeadbeef;
  void* detail = reinterpret_cast<void*>(1);
  using CheckFn = CUresult (*)(CUcontext, uint32_t*, void**);
  ASSERT_CU(slot<CheckFn>(kChecks, 2)(nullptr, &flags, &detail));
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(detail, nullptr);
  using Check3Fn = uint32_t (*)();
  EXPECT_EQ(slot<Check3Fn>(kChecks, 3)(), 0u);
}

TEST_F(ExportTables, RuntimeCallbackBuffers) {
  using BufferFn = void (*)(void**, size_t*);
  void* large = nullptr;
  void* small = nullptr;
  size_t large_size = 0, small_size = 0;
  slot<BufferFn>(kHooks, 2)(&large, &large_size);
  slot<BufferFn>(kHooks, 6)(&small, &small_size);
  EXPECT_NE(large, nullptr);
  EXPECT_NE(small, nullptr);
  EXPECT_NE(large, small);
  EXPECT_EQ(large_size, 1024u);
  EXPECT_EQ(small_size, 14u);
}

// TOOLS_TLS slot 2 writes the calling thread's current context, whatever
// the word held before: cuBLASLt hands it an uninitialised one.
using ThreadContextFn = CUresult (*)(CUcontext*);
using ContextIdFn = CUresult (*)(CUcontext, unsigned long long*);

TEST_F(ExportTables, ToolsThreadContextIsTheCurrentContext) {
  const auto thread_context = slot<ThreadContextFn>(kToolsTls, 2);
  ASSERT_CU(cuCtxSetCurrent(nullptr));
  CUcontext got = reinterpret_cast<CUcontext>(0x000a000200191c14);
  ASSERT_CU(thread_context(&got));
  EXPECT_EQ(got, nullptr);

  CUcontext ctx = nullptr;
  ASSERT_CU(cuCtxCreate_v2(&ctx, 0, 0));
  got = reinterpret_cast<CUcontext>(0x000a000200191c14);
  ASSERT_CU(thread_context(&got));
  EXPECT_EQ(got, ctx);
  // What cuBLASLt does next: the context's id through TOOLS_CONTEXT.
  unsigned long long id = 0, expected = 0;
  ASSERT_CU(slot<ContextIdFn>(kToolsContext, 4)(got, &id));
  ASSERT_CU(cuCtxGetId(ctx, &expected));
  EXPECT_EQ(id, expected);

  // Per thread: another thread without a current context sees none.
  CUcontext other_thread = ctx;
  CUresult other_result = CUDA_ERROR_UNKNOWN;
  std::thread([&] { other_result = thread_context(&other_thread); }).join();
  EXPECT_CU(other_result);
  EXPECT_EQ(other_thread, nullptr);

  EXPECT_EQ(thread_context(nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuCtxDestroy_v2(ctx));
  ASSERT_CU(cuCtxSetCurrent(nullptr));
}

TEST_F(ExportTables, ToolsContextIdsAndStreams) {
  init_primary(0);
  CUcontext ctx = nullptr;
  ASSERT_CU(cuCtxGetCurrent(&ctx));
  unsigned long long id = 0, expected = 0;
  ASSERT_CU(slot<ContextIdFn>(kToolsContext, 4)(ctx, &id));
  ASSERT_CU(cuCtxGetId(ctx, &expected));
  EXPECT_EQ(id, expected);

  using HandleFn = CUresult (*)(CUcontext, CUstream, void**);
  using StreamFn = CUresult (*)(CUcontext, void*, CUstream*);
  const auto to_handle = slot<HandleFn>(kToolsContext, 51);
  const auto to_stream = slot<StreamFn>(kToolsContext, 39);
  void* legacy = nullptr;
  ASSERT_CU(to_handle(ctx, nullptr, &legacy));
  ASSERT_NE(legacy, nullptr);
  void* again = nullptr;
  ASSERT_CU(to_handle(nullptr, CU_STREAM_LEGACY, &again));
  EXPECT_EQ(again, legacy);
  CUstream back = reinterpret_cast<CUstream>(1);
  ASSERT_CU(to_stream(ctx, legacy, &back));
  EXPECT_EQ(back, nullptr);

  CUstream stream = nullptr;
  ASSERT_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  void* handle = nullptr;
  ASSERT_CU(to_handle(ctx, stream, &handle));
  EXPECT_NE(handle, legacy);
  ASSERT_CU(to_stream(ctx, handle, &back));
  EXPECT_EQ(back, stream);
  ASSERT_CU(cuStreamDestroy_v2(stream));
  EXPECT_EQ(to_stream(ctx, handle, &back), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(to_handle(ctx, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace fakecuda::test
