// Entry-point lookup: cuGetProcAddress and _v2 answer from the table in
// entry_points.inc, one row per exported variant:
//   FAKECUDA_ENTRY(base name, exported symbol, CUDA version, stream suffix)
// Each row is checked at compile time against cudaTypedefs.h: the symbol's
// type must be PFN_<base>_v<version><suffix>, the toolkit's own record of
// which variant a version means.
#include <cudaTypedefs.h>

#include <cstdio>
#include <cstring>
#include <type_traits>

#include "driver.h"

using namespace fakecuda;

namespace {

enum class StreamKind { kLegacy, kPerThread };

struct EntryPoint {
  const char* base;
  int version;
  StreamKind stream;
  void* fn;
  void* traced;  // the same, naming its failures on stderr (FAKECUDA_DEBUG=calls)
};

// A call through a looked-up pointer that says on stderr when it fails: how
// a library's failure is traced to the driver answer it did not accept.
template <typename F, F fn, const char* name>
struct Traced;
template <typename... Args, CUresult (*fn)(Args...), const char* name>
struct Traced<CUresult (*)(Args...), fn, name> {
  static CUresult call(Args... args) {
    const CUresult result = fn(args...);
    if (result != CUDA_SUCCESS) {
      const char* error = nullptr;
      cuGetErrorName(result, &error);
      std::fprintf(stderr, "fakecuda: %s -> %s\n", name, error ? error : "?");
    }
    return result;
  }
};

#define FAKECUDA_STREAM_KIND_ StreamKind::kLegacy
#define FAKECUDA_STREAM_KIND__ptsz StreamKind::kPerThread
#define FAKECUDA_STREAM_KIND__ptds StreamKind::kPerThread

#define FAKECUDA_ENTRY(base, symbol, version, suffix)                               \
  static_assert(std::is_same_v<decltype(&symbol), PFN_##base##_v##version##suffix>, \
                #symbol " is not the variant PFN_" #base "_v" #version #suffix " names");
#include "entry_points.inc"
#undef FAKECUDA_ENTRY

#define FAKECUDA_ENTRY(base, symbol, version, suffix) constexpr char kName_##symbol[] = #symbol;
#include "entry_points.inc"
#undef FAKECUDA_ENTRY

const EntryPoint kEntryPoints[] = {
#define FAKECUDA_ENTRY(base, symbol, version, suffix)                               \
  {#base, version, FAKECUDA_STREAM_KIND_##suffix, reinterpret_cast<void*>(&symbol), \
   reinterpret_cast<void*>(&Traced<decltype(&symbol), &symbol, kName_##symbol>::call)},
#include "entry_points.inc"
#undef FAKECUDA_ENTRY
};

CUresult get_proc_address(const char* symbol, void** pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status) {
  FAKECUDA_REQUIRE(symbol && pfn, CUDA_ERROR_INVALID_VALUE);
  constexpr cuuint64_t kKnownFlags =
      CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  FAKECUDA_REQUIRE((flags & ~kKnownFlags) == 0, CUDA_ERROR_INVALID_VALUE);
  *pfn = nullptr;
  int driver_version = 0;
  cuDriverGetVersion(&driver_version);
  if (version > driver_version) return CUDA_ERROR_INVALID_VALUE;
  // Without a flag, the legacy default stream (this library is not built
  // with per-thread default streams).
  const bool per_thread = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  const EntryPoint* best = nullptr;
  bool known = false;
  for (const EntryPoint& e : kEntryPoints) {
    if (std::strcmp(e.base, symbol) != 0) continue;
    known = true;
    if (e.version > version) continue;
    if (e.stream == StreamKind::kPerThread && !per_thread) continue;
    // The newest variant the caller's version allows; a per-thread variant
    // wins over the legacy one of the same ABI when per-thread is asked for.
    if (!best || e.version > best->version ||
        (e.version == best->version && e.stream == StreamKind::kPerThread))
      best = &e;
  }
  if (status)
    *status = best    ? CU_GET_PROC_ADDRESS_SUCCESS
              : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                      : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (best)
    *pfn = debug_calls_enabled() ? best->traced : best->fn;
  else if (debug_enabled())
    std::fprintf(stderr, "fakecuda: cuGetProcAddress(\"%s\", %d, %s) -> NULL (%s)\n", symbol,
                 version, per_thread ? "per-thread" : "legacy",
                 known ? "version too old" : "unknown name");
  return CUDA_SUCCESS;
}

}  // namespace

FAKECUDA_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                             cuuint64_t flags,
                                             CUdriverProcAddressQueryResult* symbolStatus) {
  return get_proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
}

FAKECUDA_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                          cuuint64_t flags) {
  return get_proc_address(symbol, pfn, cudaVersion, flags, nullptr);
}
