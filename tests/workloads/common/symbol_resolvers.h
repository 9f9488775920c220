// The four ways a program obtains a driver function (see CUDA-NOTES.md, "three
// ways a program reaches a driver function"; cuGetProcAddress has two forms).
#pragma once

#include <memory>
#include <string>

#include "driver_api.h"

namespace workloads {

// One variant of a driver function, as a row of driver_entry_points.h names it.
struct DriverVariant {
  const char* name;    // base name, what cuGetProcAddress takes: "cuMemAlloc"
  int version;         // the version that selects this variant: 3020
  const char* symbol;  // what libcuda exports for it: "cuMemAlloc_v2"
};

// Finds driver functions through one access path.
class SymbolResolver {
 public:
  virtual ~SymbolResolver() = default;
  // The variant's address, or null with a reason (one clause, no name) in `why`.
  virtual void* resolve(const DriverVariant& variant, std::string& why) = 0;
};

// A resolver for `path`, asking for `mode`'s variants where the path takes
// flags (the cuGetProcAddress paths). Null, with `error` set, when the path
// cannot start: no libcuda.so.1, or no cuGetProcAddress in it.
std::unique_ptr<SymbolResolver> make_symbol_resolver(AccessPath path, StreamMode mode,
                                                     std::string& error);

}  // namespace workloads
