// The driver functions as the dynamic linker bound them when this program was
// loaded: the `linked` access path, i.e. a program built with -lcuda.
#pragma once

#include <string_view>

namespace workloads {

// Address of the exported driver symbol `symbol` (e.g. "cuMemAlloc_v2"), or
// null when the libcuda.so.1 this process loaded does not define it.
void* find_linked_symbol(std::string_view symbol);

}  // namespace workloads
