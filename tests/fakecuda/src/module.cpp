// Modules and functions. Images are read by image.cpp (fatbin, cubin, PTX);
// a module keeps each kernel's name and parameter layout and places the
// image's variables in device memory with their initial bytes. Kernel code
// is never run (see launch.cpp for how long a kernel takes).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "context.h"
#include "functions.h"

using namespace fakecuda;

namespace fakecuda {

bool eager_loading() {
  return Driver::get().config().process.eager_module_loading;
}

void device_capability(int ordinal, unsigned* major, unsigned* minor) {
  const DeviceConfig* config = Driver::get().device(ordinal).config;
  *major = config->cc_major;
  *minor = config->cc_minor;
}

CUresult read_image_for_device(ImageBytes bytes, int ordinal, Image* out) {
  unsigned major = 0, minor = 0;
  device_capability(ordinal, &major, &minor);
  return read_image(bytes, major, minor, out);
}

CUresult apply_jit_options(unsigned count, const CUjit_option* options, void** values) {
  FAKECUDA_REQUIRE(count == 0 || (options && values), CUDA_ERROR_INVALID_VALUE);
  for (unsigned i = 0; i < count; ++i)
    FAKECUDA_REQUIRE(options[i] >= 0 && options[i] < CU_JIT_NUM_OPTIONS, CUDA_ERROR_INVALID_VALUE);
  for (unsigned i = 0; i < count; ++i) {
    switch (options[i]) {
      case CU_JIT_WALL_TIME: {
        const float ms = 0;
        std::memcpy(&values[i], &ms, sizeof(ms));
        break;
      }
      case CU_JIT_INFO_LOG_BUFFER:
      case CU_JIT_ERROR_LOG_BUFFER: {
        // The log is empty; its buffer holds at least the terminator.
        const CUjit_option size_option = options[i] == CU_JIT_INFO_LOG_BUFFER
                                             ? CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
                                             : CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
        for (unsigned j = 0; j < count; ++j)
          if (options[j] == size_option && reinterpret_cast<uintptr_t>(values[j]) > 0 && values[i])
            static_cast<char*>(values[i])[0] = '\0';
        break;
      }
      default:
        break;
    }
  }
  for (unsigned i = 0; i < count; ++i)
    if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
        options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      values[i] = nullptr;  // bytes of log written
  return CUDA_SUCCESS;
}

CUresult load_module_locked(CUctx_st* ctx, const Image& image, CUlib_st* library, CUmod_st** out) {
  Driver& d = Driver::get();
  auto module = std::make_unique<CUmod_st>();
  module->magic = kModuleMagic;
  module->ctx = ctx;
  module->library = library;
  // Variables share one mapping, each aligned as device allocations are.
  constexpr size_t kAlign = 256;
  size_t bytes = 0;
  for (const GlobalImage& var : image.globals)
    bytes = round_up(bytes, kAlign) + std::max<uint64_t>(var.size, 1);
  module->globals_mapped = bytes ? round_up(bytes, 4096) : 0;
  // Code lives in device memory too.
  module->charged = round_up(image.code_bytes + bytes, kPageSize);
  if (module->charged == 0) module->charged = kPageSize;
  if (!d.shared().charge(ctx->physical, module->charged)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (module->globals_mapped) {
    module->globals_base = map_device_memory(module->globals_mapped);
    if (!module->globals_base) {
      d.shared().uncharge(ctx->physical, module->charged);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  size_t offset = 0;
  for (const GlobalImage& var : image.globals) {
    offset = round_up(offset, kAlign);
    const uintptr_t address = reinterpret_cast<uintptr_t>(module->globals_base) + offset;
    std::memcpy(reinterpret_cast<void*>(address), var.init.data(), var.init.size());
    module->globals.push_back(ModuleGlobal{var.name, address, var.size, var.managed});
    Allocation a;
    a.base = address;
    a.size = var.size;
    a.physical = ctx->physical;
    a.ordinal = ctx->ordinal;
    a.kind = AllocationKind::kModule;
    a.ctx = ctx;
    d.allocations[a.base] = a;
    offset += std::max<uint64_t>(var.size, 1);
  }
  const bool loaded = eager_loading();
  for (size_t i = 0; i < image.kernels.size(); ++i) {
    const KernelImage& kernel = image.kernels[i];
    auto fn = std::make_unique<CUfunc_st>();
    fn->magic = kFunctionMagic;
    fn->module = module.get();
    fn->name = std::make_shared<const std::string>(kernel.name);
    fn->param_sizes = kernel.param_sizes;
    fn->param_offsets = kernel.param_offsets;
    fn->timed = is_timed_kernel(kernel);
    fn->loaded = loaded;
    if (library) {
      fn->kernel = library->kernels[i].get();
      auto set = fn->kernel->attributes.find(ctx->ordinal);
      if (set != fn->kernel->attributes.end()) fn->attributes = set->second;
    }
    d.live.insert(fn.get());
    module->functions.push_back(std::move(fn));
  }
  *out = module.release();
  return CUDA_SUCCESS;
}

void destroy_module_locked(CUmod_st* module) {
  Driver& d = Driver::get();
  for (auto& fn : module->functions)
    d.live.erase(fn.get());
  for (const ModuleGlobal& var : module->globals)
    d.allocations.erase(var.address);
  if (module->globals_base) unmap_device_memory(module->globals_base, module->globals_mapped);
  d.shared().uncharge(module->ctx->physical, module->charged);
  if (module->library) module->library->modules.erase(module->ctx);
  delete module;
}

CUresult param_info(const std::vector<uint32_t>& sizes, const std::vector<uint32_t>& offsets,
                    size_t index, size_t* offset, size_t* size) {
  FAKECUDA_REQUIRE(index < sizes.size(), CUDA_ERROR_INVALID_VALUE);
  if (offset) *offset = offsets[index];
  if (size) *size = sizes[index];
  return CUDA_SUCCESS;
}

CUresult get_function_attribute(const FunctionAttributes& a, CUfunction_attribute attrib,
                                int* value) {
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = 1024;
      break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
      *value = 0;
      break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *value = 16;
      break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
      *value = 90;
      break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *value = a.max_dynamic_shared;
      break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      *value = a.carveout;
      break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      *value = a.cluster[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH];
      break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      *value = a.non_portable_cluster;
      break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      *value = a.cluster_scheduling;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult set_function_attribute(FunctionAttributes* a, CUfunction_attribute attrib, int value) {
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      // Up to the device's opt-in limit (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN).
      FAKECUDA_REQUIRE(value >= 0 && value <= (227 << 10), CUDA_ERROR_INVALID_VALUE);
      a->max_dynamic_shared = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      FAKECUDA_REQUIRE(value >= -1 && value <= 100, CUDA_ERROR_INVALID_VALUE);
      a->carveout = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      FAKECUDA_REQUIRE(value >= 0 && value <= 16, CUDA_ERROR_INVALID_VALUE);
      a->cluster[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      FAKECUDA_REQUIRE(value == 0 || value == 1, CUDA_ERROR_INVALID_VALUE);
      a->non_portable_cluster = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      FAKECUDA_REQUIRE(value >= CU_CLUSTER_SCHEDULING_POLICY_DEFAULT &&
                           value <= CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING,
                       CUDA_ERROR_INVALID_VALUE);
      a->cluster_scheduling = value;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;  // read-only or unknown
  }
}

}  // namespace fakecuda

namespace {

CUresult load(CUmodule* out, ImageBytes bytes) {
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  Image image;
  if (CUresult r = read_image_for_device(bytes, ctx->ordinal, &image); r != CUDA_SUCCESS) return r;
  CUmod_st* module = nullptr;
  if (CUresult r = load_module_locked(ctx, image, nullptr, &module); r != CUDA_SUCCESS) return r;
  d.live.insert(module);
  *out = module;
  return CUDA_SUCCESS;
}

CUresult live_function(CUfunction handle, CUfunc_st** out) {
  return resolve_function_locked(handle, nullptr, out);
}

}  // namespace

FAKECUDA_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(module && image, CUDA_ERROR_INVALID_VALUE);
  return load(module, ImageBytes{static_cast<const unsigned char*>(image), 0, false});
}

FAKECUDA_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image,
                                            unsigned int numOptions, CUjit_option* options,
                                            void** optionValues) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(module && image, CUDA_ERROR_INVALID_VALUE);
  if (CUresult r = apply_jit_options(numOptions, options, optionValues); r != CUDA_SUCCESS)
    return r;
  return cuModuleLoadData(module, image);
}

FAKECUDA_EXPORT CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  return cuModuleLoadData(module, fatCubin);
}

FAKECUDA_EXPORT CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(module && fname, CUDA_ERROR_INVALID_VALUE);
  std::ifstream in(fname, std::ios::binary);
  FAKECUDA_REQUIRE(in, CUDA_ERROR_FILE_NOT_FOUND);
  std::stringstream contents;
  contents << in.rdbuf();
  const std::string bytes = contents.str();
  return load(module,
              ImageBytes{reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), true});
}

FAKECUDA_EXPORT CUresult cuModuleUnload(CUmodule hmod) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hmod, kModuleMagic), CUDA_ERROR_INVALID_HANDLE);
  // A library's module goes with the library (cuLibraryUnload).
  FAKECUDA_REQUIRE(!hmod->library, CUDA_ERROR_NOT_PERMITTED);
  d.live.erase(hmod);
  destroy_module_locked(hmod);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(hfunc && name, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hmod, kModuleMagic), CUDA_ERROR_INVALID_HANDLE);
  for (auto& fn : hmod->functions) {
    if (*fn->name == name) {
      *hfunc = fn.get();
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

FAKECUDA_EXPORT CUresult cuModuleGetFunctionCount(unsigned int* count, CUmodule mod) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(count, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(mod, kModuleMagic), CUDA_ERROR_INVALID_HANDLE);
  *count = static_cast<unsigned>(mod->functions.size());
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuModuleEnumerateFunctions(CUfunction* functions,
                                                    unsigned int numFunctions, CUmodule mod) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(functions, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(mod, kModuleMagic), CUDA_ERROR_INVALID_HANDLE);
  // At most numFunctions handles go into the buffer.
  const size_t n = std::min<size_t>(numFunctions, mod->functions.size());
  for (size_t i = 0; i < n; ++i)
    functions[i] = mod->functions[i].get();
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, CUmodule hmod,
                                              const char* name) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(name, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hmod, kModuleMagic), CUDA_ERROR_INVALID_HANDLE);
  for (const ModuleGlobal& var : hmod->globals) {
    if (var.name == name) {
      if (dptr) *dptr = var.address;
      if (bytes) *bytes = var.size;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

FAKECUDA_EXPORT CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(mode, CUDA_ERROR_INVALID_VALUE);
  *mode = eager_loading() ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuFuncGetName(const char** name, CUfunction hfunc) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(name, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUfunc_st* f = nullptr;
  if (CUresult r = live_function(hfunc, &f); r != CUDA_SUCCESS) return r;
  *name = f->name->c_str();
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuFuncGetModule(CUmodule* hmod, CUfunction hfunc) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(hmod, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUfunc_st* f = nullptr;
  if (CUresult r = live_function(hfunc, &f); r != CUDA_SUCCESS) return r;
  *hmod = f->module;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuFuncLoad(CUfunction hfunc) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUfunc_st* f = nullptr;
  if (CUresult r = live_function(hfunc, &f); r != CUDA_SUCCESS) return r;
  f->loaded = true;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuFuncIsLoaded(CUfunctionLoadingState* state, CUfunction hfunc) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(state, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hfunc, kFunctionMagic), CUDA_ERROR_INVALID_HANDLE);
  *state = hfunc->loaded ? CU_FUNCTION_LOADING_STATE_LOADED : CU_FUNCTION_LOADING_STATE_UNLOADED;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t* paramOffset,
                                            size_t* paramSize) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(paramOffset, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUfunc_st* f = nullptr;
  if (CUresult r = live_function(func, &f); r != CUDA_SUCCESS) return r;
  return param_info(f->param_sizes, f->param_offsets, paramIndex, paramOffset, paramSize);
}

FAKECUDA_EXPORT CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute attrib,
                                            CUfunction hfunc) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pi, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUfunc_st* f = nullptr;
  if (CUresult r = live_function(hfunc, &f); r != CUDA_SUCCESS) return r;
  return get_function_attribute(f->attributes, attrib, pi);
}

FAKECUDA_EXPORT CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib,
                                            int value) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUfunc_st* f = nullptr;
  if (CUresult r = live_function(hfunc, &f); r != CUDA_SUCCESS) return r;
  return set_function_attribute(&f->attributes, attrib, value);
}

FAKECUDA_EXPORT CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(config >= CU_FUNC_CACHE_PREFER_NONE && config <= CU_FUNC_CACHE_PREFER_EQUAL,
                   CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUfunc_st* f = nullptr;
  if (CUresult r = live_function(hfunc, &f); r != CUDA_SUCCESS) return r;
  f->attributes.cache = config;
  return CUDA_SUCCESS;
}
