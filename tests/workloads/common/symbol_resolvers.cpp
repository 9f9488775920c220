#include "symbol_resolvers.h"

#include <dlfcn.h>

#include "cu_check.h"
#include "linked_symbols.h"

namespace workloads {
namespace {

// The name every CUDA program loads the driver by: the soname, never the
// development symlink libcuda.so, which driver packages do not always ship.
constexpr const char* kDriverLibrary = "libcuda.so.1";

class LinkedResolver final : public SymbolResolver {
 public:
  void* resolve(const DriverVariant& variant, std::string& why) override {
    void* address = find_linked_symbol(variant.symbol);
    if (!address)
      why = std::string("not defined by the ") + kDriverLibrary + " this program loaded";
    return address;
  }
};

class DlsymResolver final : public SymbolResolver {
 public:
  explicit DlsymResolver(void* handle) : handle_(handle) {}

  void* resolve(const DriverVariant& variant, std::string& why) override {
    void* address = dlsym(handle_, variant.symbol);
    if (!address) why = std::string(kDriverLibrary) + " does not export it";
    return address;
  }

 private:
  void* handle_;
};

cuuint64_t proc_address_flags(StreamMode mode) {
  return mode == StreamMode::per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                        : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
}

// "cuGetProcAddress("cuLaunchKernel", 7000, per-thread)", for messages.
std::string describe_request(const char* getter, const DriverVariant& variant, StreamMode mode) {
  return std::string(getter) + "(\"" + variant.name + "\", " + std::to_string(variant.version) +
         ", " + std::string(to_string(mode)) + ")";
}

class ProcResolver final : public SymbolResolver {
 public:
  ProcResolver(PFN_cuGetProcAddress_v11030 get_proc_address, StreamMode mode)
      : get_proc_address_(get_proc_address), mode_(mode) {}

  void* resolve(const DriverVariant& variant, std::string& why) override {
    void* address = nullptr;
    const CUresult result =
        get_proc_address_(variant.name, &address, variant.version, proc_address_flags(mode_));
    // The first form cannot say why it found nothing: an unknown symbol and a
    // variant newer than the driver both read as success with a null pointer.
    if (result != CUDA_SUCCESS) {
      why =
          describe_request("cuGetProcAddress", variant, mode_) + " returned " + error_name(result);
      return nullptr;
    }
    if (!address) why = describe_request("cuGetProcAddress", variant, mode_) + " found nothing";
    return address;
  }

 private:
  PFN_cuGetProcAddress_v11030 get_proc_address_;
  StreamMode mode_;
};

class ProcV2Resolver final : public SymbolResolver {
 public:
  ProcV2Resolver(PFN_cuGetProcAddress_v12000 get_proc_address, StreamMode mode)
      : get_proc_address_(get_proc_address), mode_(mode) {}

  void* resolve(const DriverVariant& variant, std::string& why) override {
    void* address = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    const CUresult result = get_proc_address_(variant.name, &address, variant.version,
                                              proc_address_flags(mode_), &status);
    const std::string request = describe_request("cuGetProcAddress_v2", variant, mode_);
    if (result != CUDA_SUCCESS) {
      why = request + " returned " + error_name(result);
      return nullptr;
    }
    switch (status) {
      case CU_GET_PROC_ADDRESS_SUCCESS:
        if (!address) why = request + " reported success with a null pointer";
        return address;
      case CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND:
        why = request + ": the driver does not have it";
        return nullptr;
      case CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT:
        why = request + ": the driver has only older variants";
        return nullptr;
    }
    why = request + " reported status " + std::to_string(static_cast<int>(status));
    return nullptr;
  }

 private:
  PFN_cuGetProcAddress_v12000 get_proc_address_;
  StreamMode mode_;
};

// The driver, loaded as the CUDA runtime loads it. Never closed: function
// pointers into it live as long as the process.
void* open_driver(std::string& error) {
  void* handle = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* reason = dlerror();
    error =
        std::string("cannot load ") + kDriverLibrary + ": " + (reason ? reason : "unknown error");
  }
  return handle;
}

// The one symbol a cuGetProcAddress path looks up with dlsym.
template <typename Pfn>
Pfn find_getter(void* handle, const char* symbol, std::string& error) {
  void* address = dlsym(handle, symbol);
  if (!address) error = std::string(symbol) + ": " + kDriverLibrary + " does not export it";
  return reinterpret_cast<Pfn>(address);
}

}  // namespace

std::unique_ptr<SymbolResolver> make_symbol_resolver(AccessPath path, StreamMode mode,
                                                     std::string& error) {
  if (path == AccessPath::linked) return std::make_unique<LinkedResolver>();

  void* handle = open_driver(error);
  if (!handle) return nullptr;
  switch (path) {
    case AccessPath::linked:
      break;
    case AccessPath::dlsym:
      return std::make_unique<DlsymResolver>(handle);
    case AccessPath::proc:
      if (auto getter = find_getter<PFN_cuGetProcAddress_v11030>(handle, "cuGetProcAddress", error))
        return std::make_unique<ProcResolver>(getter, mode);
      return nullptr;
    case AccessPath::proc_v2:
      if (auto getter =
              find_getter<PFN_cuGetProcAddress_v12000>(handle, "cuGetProcAddress_v2", error))
        return std::make_unique<ProcV2Resolver>(getter, mode);
      return nullptr;
  }
  error = "unknown access path";
  return nullptr;
}

}  // namespace workloads
