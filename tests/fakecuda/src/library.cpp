// Libraries (cuLibrary*) and their kernels (cuKernel*): context-independent
// images, each loaded into a context as a module when first used there
// (CUDA_MODULE_LOADING=LAZY, the default: the first cuKernelGetFunction,
// cuLibraryGetModule/GetGlobal or launch with the CUkernel), or into every
// context at load and at context creation (EAGER). Loading charges the
// module's device memory, so a program that filled the device first fails
// there with CUDA_ERROR_OUT_OF_MEMORY, as with the real driver. The CUDA
// runtime registers every fatbin of a program this way.
#include <fstream>
#include <set>
#include <sstream>

#include "context.h"
#include "functions.h"

using namespace fakecuda;

namespace {

// Every live library, for EAGER loading into new contexts (under Driver::mu).
std::set<CUlib_st*>& libraries() {
  static auto* all = new std::set<CUlib_st*>;
  return *all;
}

// The library's module in `ctx`, loaded now if it is not yet.
CUresult library_module_locked(CUlib_st* library, CUctx_st* ctx, CUmod_st** out) {
  auto it = library->modules.find(ctx);
  if (it != library->modules.end()) {
    *out = it->second;
    return CUDA_SUCCESS;
  }
  CUmod_st* module = nullptr;
  if (CUresult r = load_module_locked(ctx, *library->image, library, &module); r != CUDA_SUCCESS)
    return r;
  Driver::get().live.insert(module);
  library->modules[ctx] = module;
  *out = module;
  return CUDA_SUCCESS;
}

void unload_module_locked(CUmod_st* module) {
  Driver::get().live.erase(module);
  destroy_module_locked(module);
}

CUresult current_library_module(CUlib_st* library, CUmod_st** out) {
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  return library_module_locked(library, ctx, out);
}

// CU_LIBRARY_BINARY_IS_PRESERVED is a flag and reads no value: cuBLASLt
// passes it with no array of values. Only the host table option needs one.
CUresult check_library_options(const CUlibraryOption* options, void** values, unsigned count) {
  FAKECUDA_REQUIRE(count == 0 || options, CUDA_ERROR_INVALID_VALUE);
  for (unsigned i = 0; i < count; ++i) {
    FAKECUDA_REQUIRE(options[i] >= 0 && options[i] < CU_LIBRARY_NUM_OPTIONS,
                     CUDA_ERROR_INVALID_VALUE);
    FAKECUDA_REQUIRE(options[i] == CU_LIBRARY_BINARY_IS_PRESERVED || values,
                     CUDA_ERROR_INVALID_VALUE);
  }
  return CUDA_SUCCESS;
}

CUresult load_library(CUlibrary* out, ImageBytes bytes, CUjit_option* jit_options,
                      void** jit_values, unsigned jit_count, CUlibraryOption* options,
                      void** values, unsigned count) {
  if (CUresult r = check_library_options(options, values, count); r != CUDA_SUCCESS) return r;
  if (CUresult r = apply_jit_options(jit_count, jit_options, jit_values); r != CUDA_SUCCESS)
    return r;
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.device_count() > 0, CUDA_ERROR_NO_DEVICE);
  // Every device of the machine has the same architecture (FAKECUDA_CC).
  CUctx_st* current = current_context();
  auto image = std::make_shared<Image>();
  if (CUresult r =
          read_image_for_device(bytes, live_context(current) ? current->ordinal : 0, image.get());
      r != CUDA_SUCCESS)
    return r;
  auto library = std::make_unique<CUlib_st>();
  library->magic = kLibraryMagic;
  library->image = image;
  for (size_t i = 0; i < image->kernels.size(); ++i) {
    auto kernel = std::make_unique<CUkern_st>();
    kernel->magic = kKernelMagic;
    kernel->library = library.get();
    kernel->index = i;
    library->kernels.push_back(std::move(kernel));
  }
  if (eager_loading()) {
    for (CUctx_st* ctx : d.contexts) {
      CUmod_st* module = nullptr;
      if (CUresult r = library_module_locked(library.get(), ctx, &module); r != CUDA_SUCCESS) {
        // Nothing changes: what was loaded goes again.
        while (!library->modules.empty())
          unload_module_locked(library->modules.begin()->second);
        return r;
      }
    }
  }
  for (auto& kernel : library->kernels)
    d.live.insert(kernel.get());
  d.live.insert(library.get());
  libraries().insert(library.get());
  *out = library.release();
  return CUDA_SUCCESS;
}

CUkern_st* live_kernel(CUkernel kernel) {
  return Driver::get().is_live(kernel, kKernelMagic) ? kernel : nullptr;
}

}  // namespace

namespace fakecuda {

CUresult resolve_function_locked(CUfunction handle, CUctx_st* ctx, CUfunc_st** out) {
  Driver& d = Driver::get();
  if (d.is_live(handle, kFunctionMagic)) {
    *out = handle;
    return CUDA_SUCCESS;
  }
  CUkern_st* kernel = live_kernel(reinterpret_cast<CUkernel>(handle));
  if (!kernel) return CUDA_ERROR_INVALID_HANDLE;
  if (!ctx) {
    if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  } else if (!live_context(ctx)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  CUmod_st* module = nullptr;
  if (CUresult r = library_module_locked(kernel->library, ctx, &module); r != CUDA_SUCCESS)
    return r;
  *out = module->functions[kernel->index].get();
  return CUDA_SUCCESS;
}

void load_libraries_into_locked(CUctx_st* ctx) {
  if (!eager_loading()) return;
  // A library the new context cannot hold is loaded at its first use there
  // instead, where the failure is reported.
  for (CUlib_st* library : libraries()) {
    CUmod_st* module = nullptr;
    (void)library_module_locked(library, ctx, &module);
  }
}

}  // namespace fakecuda

FAKECUDA_EXPORT CUresult cuLibraryLoadData(CUlibrary* library, const void* code,
                                           CUjit_option* jitOptions, void** jitOptionsValues,
                                           unsigned int numJitOptions,
                                           CUlibraryOption* libraryOptions,
                                           void** libraryOptionValues,
                                           unsigned int numLibraryOptions) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(library && code, CUDA_ERROR_INVALID_VALUE);
  return load_library(library, ImageBytes{static_cast<const unsigned char*>(code), 0, false},
                      jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                      libraryOptionValues, numLibraryOptions);
}

FAKECUDA_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName,
                                               CUjit_option* jitOptions, void** jitOptionsValues,
                                               unsigned int numJitOptions,
                                               CUlibraryOption* libraryOptions,
                                               void** libraryOptionValues,
                                               unsigned int numLibraryOptions) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(library && fileName, CUDA_ERROR_INVALID_VALUE);
  std::ifstream in(fileName, std::ios::binary);
  FAKECUDA_REQUIRE(in, CUDA_ERROR_FILE_NOT_FOUND);
  std::stringstream contents;
  contents << in.rdbuf();
  const std::string bytes = contents.str();
  return load_library(
      library, ImageBytes{reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), true},
      jitOptions, jitOptionsValues, numJitOptions, libraryOptions, libraryOptionValues,
      numLibraryOptions);
}

FAKECUDA_EXPORT CUresult cuLibraryUnload(CUlibrary library) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(library, kLibraryMagic), CUDA_ERROR_INVALID_HANDLE);
  while (!library->modules.empty())
    unload_module_locked(library->modules.begin()->second);
  for (auto& kernel : library->kernels)
    d.live.erase(kernel.get());
  d.live.erase(library);
  libraries().erase(library);
  delete library;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library,
                                            const char* name) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pKernel && name, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(library, kLibraryMagic), CUDA_ERROR_INVALID_HANDLE);
  for (size_t i = 0; i < library->image->kernels.size(); ++i) {
    if (library->image->kernels[i].name == name) {
      *pKernel = library->kernels[i].get();
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

FAKECUDA_EXPORT CUresult cuLibraryGetKernelCount(unsigned int* count, CUlibrary lib) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(count, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(lib, kLibraryMagic), CUDA_ERROR_INVALID_HANDLE);
  *count = static_cast<unsigned>(lib->kernels.size());
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuLibraryEnumerateKernels(CUkernel* kernels, unsigned int numKernels,
                                                   CUlibrary lib) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(kernels, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(lib, kLibraryMagic), CUDA_ERROR_INVALID_HANDLE);
  // At most numKernels handles go into the buffer.
  const size_t n = std::min<size_t>(numKernels, lib->kernels.size());
  for (size_t i = 0; i < n; ++i)
    kernels[i] = lib->kernels[i].get();
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuLibraryGetModule(CUmodule* pMod, CUlibrary library) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pMod, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(library, kLibraryMagic), CUDA_ERROR_INVALID_HANDLE);
  CUmod_st* module = nullptr;
  if (CUresult r = current_library_module(library, &module); r != CUDA_SUCCESS) return r;
  *pMod = module;
  return CUDA_SUCCESS;
}

// A variable of the library in the current context; `managed_only` for
// cuLibraryGetManaged, which finds __managed__ variables alone.
static CUresult library_variable(CUdeviceptr* dptr, size_t* bytes, CUlibrary library,
                                 const char* name, bool managed_only) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(name, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(library, kLibraryMagic), CUDA_ERROR_INVALID_HANDLE);
  const auto& globals = library->image->globals;
  auto known = std::find_if(globals.begin(), globals.end(), [&](const GlobalImage& var) {
    return var.name == name && (var.managed || !managed_only);
  });
  if (known == globals.end()) return CUDA_ERROR_NOT_FOUND;
  CUmod_st* module = nullptr;
  if (CUresult r = current_library_module(library, &module); r != CUDA_SUCCESS) return r;
  const ModuleGlobal& var = module->globals[static_cast<size_t>(known - globals.begin())];
  if (dptr) *dptr = var.address;
  if (bytes) *bytes = var.size;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuLibraryGetGlobal(CUdeviceptr* dptr, size_t* bytes, CUlibrary library,
                                            const char* name) {
  return library_variable(dptr, bytes, library, name, false);
}

FAKECUDA_EXPORT CUresult cuLibraryGetManaged(CUdeviceptr* dptr, size_t* bytes, CUlibrary library,
                                             const char* name) {
  // The simulated devices report CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, so
  // managed variables are supported.
  return library_variable(dptr, bytes, library, name, true);
}

FAKECUDA_EXPORT CUresult cuLibraryGetUnifiedFunction(void** fptr, CUlibrary library,
                                                     const char* symbol) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(fptr && symbol, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(library, kLibraryMagic), CUDA_ERROR_INVALID_HANDLE);
  // Unified functions are host-callable device code; the images the
  // simulator reads never declare one.
  return CUDA_ERROR_NOT_FOUND;
}

FAKECUDA_EXPORT CUresult cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pFunc, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(live_kernel(kernel), CUDA_ERROR_INVALID_HANDLE);
  return resolve_function_locked(reinterpret_cast<CUfunction>(kernel), nullptr, pFunc);
}

FAKECUDA_EXPORT CUresult cuKernelGetLibrary(CUlibrary* pLib, CUkernel kernel) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pLib, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(live_kernel(kernel), CUDA_ERROR_INVALID_HANDLE);
  *pLib = kernel->library;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuKernelGetAttribute(int* pi, CUfunction_attribute attrib, CUkernel kernel,
                                              CUdevice dev) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pi, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(live_kernel(kernel), CUDA_ERROR_INVALID_HANDLE);
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  auto set = kernel->attributes.find(dev);
  return get_function_attribute(
      set == kernel->attributes.end() ? FunctionAttributes{} : set->second, attrib, pi);
}

// Changes the kernel's attributes on `dev`, and those of its functions in the
// contexts of that device.
template <typename Change>
static CUresult change_kernel(CUkernel kernel, CUdevice dev, Change change) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(live_kernel(kernel), CUDA_ERROR_INVALID_HANDLE);
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  FunctionAttributes attributes = kernel->attributes[dev];
  if (CUresult r = change(&attributes); r != CUDA_SUCCESS) return r;
  kernel->attributes[dev] = attributes;
  for (auto& [ctx, module] : kernel->library->modules)
    if (ctx->ordinal == dev) module->functions[kernel->index]->attributes = attributes;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                              CUdevice dev) {
  return change_kernel(
      kernel, dev, [&](FunctionAttributes* a) { return set_function_attribute(a, attrib, val); });
}

FAKECUDA_EXPORT CUresult cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config,
                                                CUdevice dev) {
  FAKECUDA_REQUIRE(config >= CU_FUNC_CACHE_PREFER_NONE && config <= CU_FUNC_CACHE_PREFER_EQUAL,
                   CUDA_ERROR_INVALID_VALUE);
  return change_kernel(kernel, dev, [&](FunctionAttributes* a) {
    a->cache = config;
    return CUDA_SUCCESS;
  });
}

FAKECUDA_EXPORT CUresult cuKernelGetName(const char** name, CUkernel hfunc) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(name, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(live_kernel(hfunc), CUDA_ERROR_INVALID_HANDLE);
  *name = hfunc->library->image->kernels[hfunc->index].name.c_str();
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex,
                                              size_t* paramOffset, size_t* paramSize) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(paramOffset, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(live_kernel(kernel), CUDA_ERROR_INVALID_HANDLE);
  const KernelImage& image = kernel->library->image->kernels[kernel->index];
  return param_info(image.param_sizes, image.param_offsets, paramIndex, paramOffset, paramSize);
}
