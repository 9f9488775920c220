// Modules and functions. The simulator reads PTX text (what the workloads
// carry): each `.entry` becomes a function with its parameter sizes. Binary
// images (cubin, fatbin) cannot be read and are refused.
//
// Kernel duration: an entry whose name starts with "spin" and whose first
// parameter is 8 bytes is a timed kernel: it occupies the device for that
// many nanoseconds (the workloads' kernel spins on %globaltimer for as long
// on a real GPU). Every other kernel takes FAKECUDA_KERNEL_NS.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "context.h"

using namespace fakecuda;

namespace {

uint32_t type_bytes(const std::string& type) {
  if (type == ".u64" || type == ".s64" || type == ".b64" || type == ".f64") return 8;
  if (type == ".u32" || type == ".s32" || type == ".b32" || type == ".f32") return 4;
  if (type == ".u16" || type == ".s16" || type == ".b16" || type == ".f16") return 2;
  if (type == ".u8" || type == ".s8" || type == ".b8") return 1;
  return 0;
}

// Parses `.param .TYPE NAME` or `.param .align N .b8 NAME[BYTES]`.
bool parse_param(const std::string& decl, uint32_t* bytes) {
  std::istringstream in(decl);
  std::string word, type, name;
  in >> word;
  if (word != ".param") return false;
  in >> type;
  if (type == ".align") {
    std::string alignment;
    in >> alignment >> type;
  }
  in >> name;
  const uint32_t element = type_bytes(type);
  if (!element) return false;
  size_t open = name.find('[');
  if (open == std::string::npos) {
    *bytes = element;
    return true;
  }
  unsigned count = 0;
  if (std::sscanf(name.c_str() + open, "[%u]", &count) != 1) return false;
  *bytes = element * count;
  return true;
}

// Extracts every `.entry NAME ( params )` of a PTX text.
bool parse_ptx(const std::string& ptx, CUmod_st* module) {
  if (ptx.find(".version") == std::string::npos || ptx.find(".target") == std::string::npos)
    return false;
  size_t pos = 0;
  while ((pos = ptx.find(".entry", pos)) != std::string::npos) {
    pos += 6;
    size_t name_start = ptx.find_first_not_of(" \t\r\n", pos);
    size_t name_end = ptx.find_first_of(" \t\r\n(", name_start);
    if (name_start == std::string::npos || name_end == std::string::npos) return false;
    auto fn = std::make_unique<CUfunc_st>();
    fn->magic = kFunctionMagic;
    fn->module = module;
    fn->name = std::make_shared<const std::string>(ptx.substr(name_start, name_end - name_start));
    size_t open = ptx.find_first_not_of(" \t\r\n", name_end);
    if (open != std::string::npos && ptx[open] == '(') {
      size_t close = ptx.find(')', open);
      if (close == std::string::npos) return false;
      std::string list = ptx.substr(open + 1, close - open - 1);
      std::istringstream params(list);
      std::string decl;
      while (std::getline(params, decl, ',')) {
        uint32_t bytes = 0;
        if (!parse_param(decl, &bytes)) return false;
        fn->param_sizes.push_back(bytes);
      }
      pos = close;
    }
    fn->timed =
        fn->name->rfind("spin", 0) == 0 && !fn->param_sizes.empty() && fn->param_sizes[0] == 8;
    module->functions.push_back(std::move(fn));
  }
  return !module->functions.empty();
}

CUresult load(CUmodule* out, const std::string& image) {
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  auto module = std::make_unique<CUmod_st>();
  module->magic = kModuleMagic;
  module->ctx = ctx;
  if (!parse_ptx(image, module.get())) return CUDA_ERROR_INVALID_IMAGE;
  // Code lives in device memory too.
  module->charged = round_up(image.size(), kPageSize);
  if (!d.shared().charge(ctx->physical, module->charged)) return CUDA_ERROR_OUT_OF_MEMORY;
  for (auto& fn : module->functions)
    d.live.insert(fn.get());
  d.live.insert(module.get());
  *out = module.release();
  return CUDA_SUCCESS;
}

}  // namespace

FAKECUDA_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(module && image, CUDA_ERROR_INVALID_VALUE);
  const auto* bytes = static_cast<const unsigned char*>(image);
  if (bytes[0] == 0x7f && bytes[1] == 'E') return CUDA_ERROR_INVALID_IMAGE;  // cubin
  return load(module, static_cast<const char*>(image));
}

FAKECUDA_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int,
                                            CUjit_option*, void**) {
  return cuModuleLoadData(module, image);
}

FAKECUDA_EXPORT CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(module && fname, CUDA_ERROR_INVALID_VALUE);
  std::ifstream in(fname, std::ios::binary);
  FAKECUDA_REQUIRE(in, CUDA_ERROR_FILE_NOT_FOUND);
  std::stringstream text;
  text << in.rdbuf();
  return load(module, text.str());
}

FAKECUDA_EXPORT CUresult cuModuleUnload(CUmodule hmod) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hmod, kModuleMagic), CUDA_ERROR_INVALID_HANDLE);
  for (auto& fn : hmod->functions)
    d.live.erase(fn.get());
  d.live.erase(hmod);
  d.shared().uncharge(hmod->ctx->physical, hmod->charged);
  delete hmod;
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

FAKECUDA_EXPORT CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t* paramOffset,
                                            size_t* paramSize) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(func, kFunctionMagic), CUDA_ERROR_INVALID_HANDLE);
  FAKECUDA_REQUIRE(paramIndex < func->param_sizes.size(), CUDA_ERROR_INVALID_VALUE);
  size_t offset = 0;
  for (size_t i = 0; i < paramIndex; ++i) {
    const size_t size = func->param_sizes[i];
    offset = round_up(offset, std::min<size_t>(size, 8)) + size;
  }
  offset = round_up(offset, std::min<size_t>(func->param_sizes[paramIndex], 8));
  if (paramOffset) *paramOffset = offset;
  if (paramSize) *paramSize = func->param_sizes[paramIndex];
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute attrib,
                                            CUfunction hfunc) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pi, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hfunc, kFunctionMagic), CUDA_ERROR_INVALID_HANDLE);
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *pi = 1024;
      break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *pi = 16;
      break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
      *pi = 90;
      break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *pi = 48 << 10;
      break;
    default:
      *pi = 0;
      break;
  }
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute, int) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hfunc, kFunctionMagic), CUDA_ERROR_INVALID_HANDLE);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hfunc, kFunctionMagic), CUDA_ERROR_INVALID_HANDLE);
  return CUDA_SUCCESS;
}
