#include "lookup/hook_table.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "gpulimit/nvidia/nvml_subset.h"
#include "lookup/real_driver.h"

namespace gpulimit {

namespace {

enum HookIndex : int {
#define GPULIMIT_INDEX(base, version, symbol, suffix) k_##symbol,
  GPULIMIT_DRIVER_HOOKS(GPULIMIT_INDEX)
#undef GPULIMIT_INDEX
      kHookCount
};

struct Row {
  std::string_view base;
  int version;
  bool per_thread;
  std::string_view symbol;
};

constexpr Row kRows[] = {
#define GPULIMIT_ROW(base, version, symbol, suffix) {#base, version, sizeof(#suffix) > 1, #symbol},
    GPULIMIT_DRIVER_HOOKS(GPULIMIT_ROW)
#undef GPULIMIT_ROW
};
static_assert(std::size(kRows) == kHookCount);

// Each hook has exactly the type its row names.
#define GPULIMIT_CHECK_TYPE(base, version, symbol, suffix)                            \
  static_assert(std::is_same_v<decltype(&::symbol), PFN_##base##_v##version##suffix>, \
                #symbol " is not the variant PFN_" #base "_v" #version #suffix);
GPULIMIT_DRIVER_HOOKS(GPULIMIT_CHECK_TYPE)
#undef GPULIMIT_CHECK_TYPE

void* hook_address(int index) {
  switch (index) {
#define GPULIMIT_HOOK_ADDRESS(base, version, symbol, suffix) \
  case k_##symbol:                                           \
    return reinterpret_cast<void*>(&::symbol);
    GPULIMIT_DRIVER_HOOKS(GPULIMIT_HOOK_ADDRESS)
#undef GPULIMIT_HOOK_ADDRESS
    default:
      return nullptr;
  }
}

// Stores `real` as the function row `index` forwards to.
void keep_real(int index, void* real) {
  switch (index) {
#define GPULIMIT_KEEP_REAL(base, version, symbol, suffix)                       \
  case k_##symbol:                                                              \
    real::symbol.store(reinterpret_cast<PFN_##base##_v##version##suffix>(real), \
                       std::memory_order_release);                              \
    break;
    GPULIMIT_DRIVER_HOOKS(GPULIMIT_KEEP_REAL)
#undef GPULIMIT_KEEP_REAL
    default:
      break;
  }
}

template <typename Less>
constexpr std::array<int, kHookCount> sorted_indices(Less less) {
  std::array<int, kHookCount> order{};
  for (int i = 0; i < kHookCount; ++i)
    order[static_cast<size_t>(i)] = i;
  std::sort(order.begin(), order.end(), less);
  return order;
}

constexpr auto kBySymbol =
    sorted_indices([](int a, int b) { return kRows[a].symbol < kRows[b].symbol; });
constexpr auto kByBase = sorted_indices([](int a, int b) {
  return kRows[a].base != kRows[b].base ? kRows[a].base < kRows[b].base
                                        : kRows[a].version < kRows[b].version;
});

// The newest version of any variant of `base` this build knows; a request
// above it may be for a variant newer than this build.
int newest_known(std::string_view base) {
  int newest = 0;
  for (const Row& row : kRows)
    if (row.base == base) newest = std::max(newest, row.version);
  return newest;
}

void warn_unknown_variant(std::string_view base, int version) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  std::fprintf(stderr,
               "gpulimit: %.*s at CUDA version %d is a variant this build does not know; "
               "that function is not limited\n",
               static_cast<int>(base.size()), base.data(), version);
}

// NVML's hooks: few enough that a linear scan is as fast as a search.
void* nvml_hook_for_symbol(const char* symbol) {
#define GPULIMIT_NVML_ANSWER(symbol_name) \
  if (std::strcmp(symbol, #symbol_name) == 0) return reinterpret_cast<void*>(&::symbol_name);
  GPULIMIT_NVML_HOOKS(GPULIMIT_NVML_ANSWER)
#undef GPULIMIT_NVML_ANSWER
  return nullptr;
}

}  // namespace

void* hook_for_symbol(const char* symbol) {
  if (!symbol) return nullptr;
  if (symbol[0] == 'n') return nvml_hook_for_symbol(symbol);
  if (symbol[0] != 'c' || symbol[1] != 'u') return nullptr;
  const std::string_view name(symbol);
  auto it = std::lower_bound(kBySymbol.begin(), kBySymbol.end(), name,
                             [](int i, std::string_view n) { return kRows[i].symbol < n; });
  if (it == kBySymbol.end() || kRows[*it].symbol != name) return nullptr;
  return hook_address(*it);
}

void* hook_for_proc_address(const char* base_name, void* real, int version, cuuint64_t flags) {
  if (!base_name || !real) return real;
  const std::string_view base(base_name);
  auto first = std::lower_bound(kByBase.begin(), kByBase.end(), base,
                                [](int i, std::string_view b) { return kRows[i].base < b; });
  auto last = first;
  while (last != kByBase.end() && kRows[*last].base == base)
    ++last;
  if (first == last) return real;  // not hooked

  // The driver answers with its exported functions: the address says which
  // variant it is, even one of another name (cuda.h 12+ maps the name
  // cuGraphInstantiate to cuGraphInstantiateWithFlags).
  for (auto it = first; it != last; ++it) {
    if (exported_address(*it) == real) {
      keep_real(*it, real);
      return hook_address(*it);
    }
  }
  for (int i = 0; i < kHookCount; ++i) {
    if (exported_address(i) == real) {
      keep_real(i, real);
      return hook_address(i);
    }
  }
  // Otherwise the version and flags decide, as the driver's own rules do:
  // the newest variant not newer than the version asked for, per-thread
  // when asked and one exists.
  if (version > newest_known(base) && version > CUDA_VERSION) {
    warn_unknown_variant(base, version);
    return real;
  }
  const bool per_thread = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  int best = -1;
  for (auto it = first; it != last; ++it) {
    const Row& row = kRows[*it];
    if (row.version > version || (row.per_thread && !per_thread)) continue;
    if (best < 0 || row.version > kRows[best].version ||
        (row.version == kRows[best].version && row.per_thread))
      best = *it;
  }
  if (best < 0) return real;
  keep_real(best, real);
  return hook_address(best);
}

}  // namespace gpulimit
