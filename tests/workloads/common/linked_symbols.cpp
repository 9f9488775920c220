#include "linked_symbols.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <type_traits>

#include "driver_entry_points.h"

// cuda.h maps this base name to cuEventElapsedTime_v2. Here we need the
// symbol itself, the first variant, which cuda.h only declares for the driver.
#undef cuEventElapsedTime

// Every symbol is declared here with the type of its PFN_ row, so that a row
// whose type disagrees with cuda.h fails to compile. The declarations are weak:
// a libcuda.so.1 without one of them (an older driver, a partial simulator)
// still loads the program, and the missing function reads as null here and is
// reported by name instead of stopping the dynamic linker. An interposer
// preloaded before libcuda still wins, as it does for strong references.
extern "C" {
#define WORKLOAD_DECLARE_WEAK(name, version, symbol) \
  __attribute__((weak)) std::remove_pointer_t<PFN_##name##_v##version> symbol;
#define WORKLOAD_DECLARE_WEAK_PT(name, version, symbol, pt_version, pt_suffix)          \
  __attribute__((weak)) std::remove_pointer_t<PFN_##name##_v##version> symbol;          \
  __attribute__((weak)) std::remove_pointer_t<PFN_##name##_v##pt_version##_##pt_suffix> \
      WORKLOAD_PT_SYMBOL(symbol, pt_suffix);
WORKLOAD_DRIVER_ENTRY_POINTS(WORKLOAD_DECLARE_WEAK, WORKLOAD_DECLARE_WEAK_PT, WORKLOAD_DECLARE_WEAK)
#undef WORKLOAD_DECLARE_WEAK
#undef WORKLOAD_DECLARE_WEAK_PT
}

namespace workloads {
namespace {

struct LinkedSymbol {
  std::string_view symbol;
  void* address;
};

#define WORKLOAD_LINKED(name, version, symbol) {#symbol, reinterpret_cast<void*>(&symbol)},
#define WORKLOAD_LINKED_PT(name, version, symbol, pt_version, pt_suffix) \
  {#symbol, reinterpret_cast<void*>(&symbol)},                           \
      {WORKLOAD_PT_SYMBOL_NAME(symbol, pt_suffix),                       \
       reinterpret_cast<void*>(&WORKLOAD_PT_SYMBOL(symbol, pt_suffix))},

// Filled by the dynamic linker's relocations, before main.
const LinkedSymbol kLinkedSymbols[] = {
    WORKLOAD_DRIVER_ENTRY_POINTS(WORKLOAD_LINKED, WORKLOAD_LINKED_PT, WORKLOAD_LINKED)};

#undef WORKLOAD_LINKED
#undef WORKLOAD_LINKED_PT

}  // namespace

void* find_linked_symbol(std::string_view symbol) {
  for (const LinkedSymbol& linked : kLinkedSymbols) {
    if (linked.symbol == symbol) return linked.address;
  }
  return nullptr;
}

}  // namespace workloads
