// cuGetExportTable: the real driver's private tables, which the CUDA runtime
// (libcudart, and the copy inside every library linked with static cudart)
// fetches at start-up and cuBLAS's heuristics fetch later. Their layouts are
// undocumented; what is here follows what cudart 13.0 was seen to call and
// the public descriptions of them (ZLUDA's dark_api). A slot nobody has seen
// called holds a function that returns CUDA_ERROR_NOT_SUPPORTED, never NULL,
// so that a caller reaching one fails visibly; FAKECUDA_DEBUG=1 names each
// such slot on stderr the first time it is called.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "context.h"
#include "driver.h"
#include "md2.h"

using namespace fakecuda;

namespace {

enum TableId {
  kCudart,
  kHooks,
  kToolsTls,
  kStorage,
  kChecks,
  kIntegrity,
  kToolsContext,
  kMatmul,
  kTest
};

constexpr const char* kTableNames[] = {
    "CUDART_INTERFACE", "TOOLS_RUNTIME_CALLBACK_HOOKS",
    "TOOLS_TLS",        "CONTEXT_LOCAL_STORAGE",
    "CONTEXT_CHECKS",   "INTEGRITY_CHECK",
    "TOOLS_CONTEXT",    "cuBLASLt matmul (1734dc26)",
    "fakecuda-test-01",
};

// Callers pass arguments this function does not read, which the C calling
// convention allows.
template <int Table, int Slot>
CUresult unknown_slot() {
  static std::atomic<bool> reported{false};
  if (debug_enabled() && !reported.exchange(true))
    std::fprintf(stderr, "fakecuda: %s slot %d was called; it is not simulated\n",
                 kTableNames[Table], Slot);
  return CUDA_ERROR_NOT_SUPPORTED;
}

template <int Id, size_t Slots>
struct Table {
  const void* slot[Slots];

  // Slot 0 holds the table's size in bytes when `sized`; every other slot
  // starts as unknown_slot.
  explicit Table(bool sized) {
    fill(std::make_index_sequence<Slots>());
    if (sized) slot[0] = reinterpret_cast<const void*>(sizeof(slot));
  }
  template <size_t... I>
  void fill(std::index_sequence<I...>) {
    ((slot[I] = reinterpret_cast<const void*>(&unknown_slot<Id, static_cast<int>(I)>)), ...);
  }
  template <class Fn>
  void set(size_t index, Fn* fn) {
    slot[index] = reinterpret_cast<const void*>(fn);
  }
};

// ---- CUDART_INTERFACE ----------------------------------------------------------

// The device's primary context, handed out whether or not it is active and
// without activating it: cudart then retains it through cuDevicePrimaryCtxRetain
// (where an interposer sees the runtime's context being created).
CUresult cudart_primary_context(CUcontext* pctx, CUdevice dev) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pctx, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  *pctx = d.primary_handle[static_cast<size_t>(dev)];
  return CUDA_SUCCESS;
}

CUresult cudart_no_op(size_t) {
  return CUDA_SUCCESS;
}

// "Load compilers": nothing to load, no kernel code runs here.
CUresult cudart_load_compilers() {
  return CUDA_SUCCESS;
}

// ---- TOOLS_RUNTIME_CALLBACK_HOOKS ----------------------------------------------

// Two buffers the runtime asks for and writes into; their contents matter
// only to tools, which the simulator has none of.
uint32_t hooks_buffer_large[1024];
uint32_t hooks_buffer_small[14];

void hooks_large_buffer(void** buffer, size_t* size) {
  *buffer = hooks_buffer_large;
  *size = sizeof(hooks_buffer_large) / sizeof(hooks_buffer_large[0]);
}

void hooks_small_buffer(void** buffer, size_t* size) {
  *buffer = hooks_buffer_small;
  *size = sizeof(hooks_buffer_small) / sizeof(hooks_buffer_small[0]);
}

void hooks_no_op() {}

// ---- TOOLS_TLS -------------------------------------------------------------------

// Slot 2: the calling thread's current context (NULL when none), as
// cuCtxGetCurrent answers. cuBLASLt 13.1 calls it before its SGEMM
// heuristics with the address of an uninitialised stack word and hands what
// it finds there to TOOLS_CONTEXT slot 4 (the context's id): a success that
// leaves the word alone makes SGEMM depend on old stack contents. Its meaning
// follows from that use and from the name a public table dump gives it
// ("get_thread_context"); not checked against a real driver.
CUresult tools_thread_context(CUcontext* pctx) {
  return cuCtxGetCurrent(pctx);
}

// ---- CONTEXT_LOCAL_STORAGE -------------------------------------------------------

// A context the storage calls may name: a live one, or a primary context's
// object even while inactive (cudart stores into it around the retain).
// Caller holds Driver::mu. NULL names the current context.
CUresult storage_context_locked(CUcontext* ctx) {
  if (!*ctx) *ctx = current_context();
  FAKECUDA_REQUIRE(*ctx, CUDA_ERROR_INVALID_CONTEXT);
  return live_context(*ctx) || is_primary_handle(*ctx) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult storage_put(CUcontext ctx, void* key, void* value, StorageDestructor destructor) {
  FAKECUDA_REQUIRE_INIT();
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  if (CUresult r = storage_context_locked(&ctx); r != CUDA_SUCCESS) return r;
  return ctx->storage->put(key, value, destructor);
}

// Forgets the value without calling its destructor.
CUresult storage_delete(CUcontext ctx, void* key) {
  FAKECUDA_REQUIRE_INIT();
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  if (CUresult r = storage_context_locked(&ctx); r != CUDA_SUCCESS) return r;
  return ctx->storage->remove(key);
}

// Runs on every runtime call: no lock. A handle is trusted as far as its tag.
CUresult storage_get(void** value, CUcontext ctx, void* key) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(value, CUDA_ERROR_INVALID_VALUE);
  if (!ctx) ctx = current_context();
  FAKECUDA_REQUIRE(ctx && ctx->magic == kContextMagic, CUDA_ERROR_INVALID_CONTEXT);
  return ctx->storage->get(key, value) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// ---- CONTEXT_CHECKS ----------------------------------------------------------------

// Flags about a context that are never set here.
CUresult checks_context(CUcontext, uint32_t* flags, void** detail) {
  if (flags) *flags = 0;
  if (detail) *detail = nullptr;
  return CUDA_SUCCESS;
}

uint32_t checks_none() {
  return 0;
}

// ---- TOOLS_CONTEXT (21318c60-...: cuBLAS's heuristics) ---------------------------

CUresult tools_context_id(CUcontext ctx, unsigned long long* id) {
  return cuCtxGetId(ctx, id);
}

// A stream's private handle: the stream object itself. NULL and
// CU_STREAM_LEGACY name the legacy stream of `ctx` (or the current context).
CUresult tools_stream_handle(CUcontext ctx, CUstream stream, void** handle) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(handle, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  if (!ctx) ctx = current_context();
  CUstream_st* s = nullptr;
  if (!stream || stream == CU_STREAM_LEGACY) {
    FAKECUDA_REQUIRE(live_context(ctx), CUDA_ERROR_INVALID_CONTEXT);
    s = ctx->legacy_stream;
  } else if (CUresult r = resolve_stream(stream, DefaultStream::kLegacy, &s); r != CUDA_SUCCESS) {
    return r;
  }
  *handle = s;
  return CUDA_SUCCESS;
}

// The handle back as the stream the application names: NULL for the legacy
// stream, CU_STREAM_PER_THREAD for a per-thread one.
CUresult tools_stream_of_handle(CUcontext, void* handle, CUstream* stream) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(stream, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(handle, kStreamMagic), CUDA_ERROR_INVALID_HANDLE);
  auto* s = static_cast<CUstream_st*>(handle);
  switch (s->kind) {
    case CUstream_st::Kind::kLegacy:
      *stream = nullptr;
      break;
    case CUstream_st::Kind::kPerThread:
      *stream = CU_STREAM_PER_THREAD;
      break;
    case CUstream_st::Kind::kUser:
      *stream = s;
      break;
  }
  return CUDA_SUCCESS;
}

// ---- The tables ------------------------------------------------------------------------

struct Tables;
const Tables& tables();
CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2]);

struct Tables {
  Table<kCudart, 13> cudart{true};
  Table<kHooks, 7> hooks{true};
  Table<kToolsTls, 4> tools_tls{true};
  Table<kStorage, 4> storage{false};  // the one table without a size word
  Table<kChecks, 4> checks{true};
  Table<kIntegrity, 3> integrity{true};
  Table<kToolsContext, 93> tools_context{true};
  // Asked for by cuBLASLt's half-precision matmul heuristics, which call its
  // slots 4 and 13 without checking that the table was given (a NULL table
  // is a crash). Its meaning is not public: every slot fails as an
  // unsimulated one does, and cuBLASLt takes its other path.
  Table<kMatmul, 32> matmul{true};
  Table<kTest, 2> test{true};

  Tables() {
    cudart.set(2, &cudart_primary_context);
    cudart.set(7, &cudart_no_op);
    cudart.set(12, &cudart_load_compilers);
    hooks.set(1, &hooks_no_op);

    tools_tls.set(2, &tools_thread_context);
    hooks.set(2, &hooks_large_buffer);
    hooks.set(4, &hooks_no_op);
    hooks.set(6, &hooks_small_buffer);
    storage.set(0, &storage_put);
    storage.set(1, &storage_delete);
    storage.set(2, &storage_get);
    checks.set(2, &checks_context);
    checks.set(3, &checks_none);
    integrity.set(1, &integrity_check);
    tools_context.set(4, &tools_context_id);
    tools_context.set(39, &tools_stream_of_handle);
    tools_context.set(51, &tools_stream_handle);
    // For tests: an interposer must hand this table through untouched.
    test.set(1, &cuGetProcAddress_v2);
  }
};

// In the library's own storage, as the real driver's tables are in its image
// (callers may ask which library a table belongs to), and trivially
// destructible, so usable until the process ends.
const Tables& tables() {
  static const Tables instance;
  return instance;
}
static_assert(std::is_trivially_destructible_v<Tables>);

// ---- INTEGRITY_CHECK -------------------------------------------------------------------

// The runtime checks that it talks to the real driver: it sends a version and
// the time, and expects an HMAC-MD2 (under a key both share) of the driver
// version, that version, the process, the thread, the addresses of two
// tables and of this function, the time, and every device's UUID and PCI
// location. Versions ending in 0 or 1 expect fixed answers.
constexpr uint8_t kIntegrityKey[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                       0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};

struct IntegrityHeader {
  uint32_t driver_version;
  uint32_t version;
  uint32_t process;
  uint32_t thread;  // pthread_self(), truncated
  const void* cudart_table;
  const void* integrity_table;
  const void* function;
  uint64_t unix_seconds;
};
static_assert(sizeof(IntegrityHeader) == 48);

struct IntegrityDevice {
  CUuuid uuid;
  int pci_domain;
  int pci_bus;
  int pci_device;
};
static_assert(sizeof(IntegrityDevice) == 28);

CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2]) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);
  switch (version % 10) {
    case 0:
      out[0] = 0x3341181c03cb675c;
      out[1] = 0x8ed383aa1f4cd1e8;
      return CUDA_SUCCESS;
    case 1:
      out[0] = 0x1841181c03cb675c;
      out[1] = 0x8ed383aa1f4cd1e8;
      return CUDA_SUCCESS;
    default:
      break;
  }
  Driver& d = Driver::get();
  const Tables& t = tables();
  const IntegrityHeader header{
      static_cast<uint32_t>(d.config().machine.driver_version),
      version,
      static_cast<uint32_t>(getpid()),
      static_cast<uint32_t>(reinterpret_cast<uintptr_t>(pthread_self())),
      t.cudart.slot,
      t.integrity.slot,
      t.integrity.slot[1],
      unix_seconds,
  };
  HmacMd2 mac(kIntegrityKey, sizeof(kIntegrityKey));
  mac.update(&header, sizeof(header));
  for (CUdevice dev = 0; dev < d.device_count(); ++dev) {
    IntegrityDevice device{};
    cuDeviceGetUuid_v2(&device.uuid, dev);
    cuDeviceGetAttribute(&device.pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev);
    cuDeviceGetAttribute(&device.pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev);
    cuDeviceGetAttribute(&device.pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev);
    mac.update(&device, sizeof(device));
  }
  const Md2Digest digest = mac.finish();
  std::memcpy(out, digest.data(), digest.size());
  return CUDA_SUCCESS;
}

// ---- Lookup --------------------------------------------------------------------------------

struct KnownTable {
  uint8_t id[16];
  const void* const* (*slots)();
};

#define FAKECUDA_TABLE(member) [] { return static_cast<const void* const*>(tables().member.slot); }
const KnownTable kKnownTables[] = {
    {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d,
      0xf9},
     FAKECUDA_TABLE(cudart)},
    {{0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a,
      0x66},
     FAKECUDA_TABLE(hooks)},
    {{0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec,
      0xdc},
     FAKECUDA_TABLE(tools_tls)},
    {{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95,
      0x93},
     FAKECUDA_TABLE(storage)},
    {{0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa,
      0x7e},
     FAKECUDA_TABLE(checks)},
    {{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1,
      0xf2},
     FAKECUDA_TABLE(integrity)},
    {{0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8,
      0xf2},
     FAKECUDA_TABLE(tools_context)},
    {{0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b,
      0xca},
     FAKECUDA_TABLE(matmul)},
    {{'f', 'a', 'k', 'e', 'c', 'u', 'd', 'a', '-', 't', 'e', 's', 't', '-', '0', '1'},
     FAKECUDA_TABLE(test)},
};
#undef FAKECUDA_TABLE

}  // namespace

// Any other table is refused with *ppExportTable NULL, never a success
// without a table. That includes f8cff951-2146-8b4e-b9e2-fb469e7c0dd9, which
// cudart 13.0 asks for first and goes on without.
FAKECUDA_EXPORT CUresult cuGetExportTable(const void** ppExportTable,
                                          const CUuuid* pExportTableId) {
  FAKECUDA_REQUIRE(ppExportTable && pExportTableId, CUDA_ERROR_INVALID_VALUE);
  for (const KnownTable& table : kKnownTables) {
    if (std::memcmp(pExportTableId->bytes, table.id, sizeof(table.id)) == 0) {
      *ppExportTable = table.slots();
      return CUDA_SUCCESS;
    }
  }
  if (debug_enabled()) {
    char hex[33];
    for (int i = 0; i < 16; ++i)
      std::snprintf(hex + 2 * i, 3, "%02x", static_cast<unsigned char>(pExportTableId->bytes[i]));
    std::fprintf(stderr, "fakecuda: cuGetExportTable(%s) refused: not simulated\n", hex);
  }
  *ppExportTable = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}
