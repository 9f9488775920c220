#include "driver_api.h"

#include <cstring>
#include <type_traits>

#include "symbol_resolvers.h"

namespace workloads {

DriverApi driver;

namespace {

// Where one DriverApi slot comes from.
struct EntryPoint {
  DriverVariant legacy;
  DriverVariant per_thread;  // symbol null: the function has no per-thread variant
  void* slot;                // a PFN_... member of `driver`
};

#define WORKLOAD_ENTRY(name, version, symbol) \
  {{#name, version, #symbol}, {nullptr, 0, nullptr}, &driver.pfn_##name},
#define WORKLOAD_ENTRY_PT(name, version, symbol, pt_version, pt_suffix) \
  {{#name, version, #symbol},                                           \
   {#name, pt_version, WORKLOAD_PT_SYMBOL_NAME(symbol, pt_suffix)},     \
   &driver.pfn_##name},
#define WORKLOAD_SKIP(...)
const EntryPoint kEntryPoints[] = {
    WORKLOAD_DRIVER_ENTRY_POINTS(WORKLOAD_ENTRY, WORKLOAD_ENTRY_PT, WORKLOAD_SKIP)};
#undef WORKLOAD_ENTRY
#undef WORKLOAD_ENTRY_PT

#define WORKLOAD_OLDER(name, version, symbol) {#name, version, #symbol},
const DriverVariant kOlderVariants[] = {
    WORKLOAD_DRIVER_ENTRY_POINTS(WORKLOAD_SKIP, WORKLOAD_SKIP, WORKLOAD_OLDER)};
#undef WORKLOAD_OLDER
#undef WORKLOAD_SKIP

// A per-thread variant must be callable through its legacy variant's type.
#define WORKLOAD_NOTHING(name, version, symbol)
#define WORKLOAD_SAME_TYPE(name, version, symbol, pt_version, pt_suffix)                           \
  static_assert(std::is_same_v<PFN_##name##_v##version, PFN_##name##_v##pt_version##_##pt_suffix>, \
                "per-thread variant of " #name " has another signature");
WORKLOAD_DRIVER_ENTRY_POINTS(WORKLOAD_NOTHING, WORKLOAD_SAME_TYPE, WORKLOAD_NOTHING)
#undef WORKLOAD_SAME_TYPE
#undef WORKLOAD_NOTHING

const DriverVariant* older_variant_of(const char* name) {
  for (const DriverVariant& older : kOlderVariants) {
    if (std::strcmp(older.name, name) == 0) return &older;
  }
  return nullptr;
}

void store(void* slot, void* address) {
  // The slots are function pointers; copy the bytes rather than write a void*
  // through a pointer of the wrong type.
  static_assert(sizeof(PFN_cuInit_v2000) == sizeof(void*));
  std::memcpy(slot, &address, sizeof(address));
}

}  // namespace

std::string_view to_string(AccessPath path) {
  switch (path) {
    case AccessPath::linked:
      return "linked";
    case AccessPath::dlsym:
      return "dlsym";
    case AccessPath::proc:
      return "proc";
    case AccessPath::proc_v2:
      return "proc-v2";
  }
  return "?";
}

std::string_view to_string(StreamMode mode) {
  return mode == StreamMode::per_thread ? "per-thread" : "legacy";
}

std::optional<AccessPath> parse_access_path(std::string_view text) {
  for (AccessPath path :
       {AccessPath::linked, AccessPath::dlsym, AccessPath::proc, AccessPath::proc_v2}) {
    if (text == to_string(path)) return path;
  }
  return std::nullopt;
}

std::optional<StreamMode> parse_stream_mode(std::string_view text) {
  for (StreamMode mode : {StreamMode::legacy, StreamMode::per_thread}) {
    if (text == to_string(mode)) return mode;
  }
  return std::nullopt;
}

bool load_driver_api(AccessPath path, StreamMode mode, std::string& error) {
  std::unique_ptr<SymbolResolver> resolver = make_symbol_resolver(path, mode, error);
  if (!resolver) return false;

  // Resolve everything before judging, so that the message can say how much
  // is missing: one absent function is a driver too old, sixty is the wrong
  // library.
  std::string first_missing;
  size_t missing = 0;
  for (const EntryPoint& entry : kEntryPoints) {
    const bool per_thread = mode == StreamMode::per_thread && entry.per_thread.symbol;
    const DriverVariant& wanted = per_thread ? entry.per_thread : entry.legacy;
    std::string why;
    void* address = resolver->resolve(wanted, why);
    if (!address && !per_thread) {
      std::string ignored;
      if (const DriverVariant* older = older_variant_of(wanted.name))
        address = resolver->resolve(*older, ignored);
    }
    if (!address) {
      if (missing++ == 0) first_missing = std::string(wanted.symbol) + ": " + why;
      continue;
    }
    store(entry.slot, address);
  }
  if (missing == 0) return true;
  error = first_missing + " (--access " + std::string(to_string(path));
  if (missing > 1) {
    error += "; " + std::to_string(missing - 1) + " more function" + (missing > 2 ? "s" : "") +
             " missing";
  }
  error += ")";
  return false;
}

}  // namespace workloads
