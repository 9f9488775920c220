// The JIT linker (cuLink*). Inputs are read like any image (cubin, PTX,
// fatbin: the entry for the context's device) and merged: the linked image
// holds every input's kernels and variables. Nothing is compiled, so the
// output is PTX text that declares exactly that interface (each kernel with
// its parameters at their offsets, each variable with its initial bytes):
// cuModuleLoadData and cuLibraryLoadData read it back, and it is valid PTX
// a real driver would load too. Host objects and archives
// (CU_JIT_INPUT_OBJECT, CU_JIT_INPUT_LIBRARY) and NVVM IR are not read.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "context.h"
#include "functions.h"

using namespace fakecuda;

struct CUlinkState_st {
  uint32_t magic;
  CUctx_st* ctx;
  Image linked;
  size_t inputs;
  std::string output;  // cuLinkComplete's image, owned until cuLinkDestroy
};

namespace {

bool matches(CUjitInputType type, ImageKind kind) {
  switch (type) {
    case CU_JIT_INPUT_CUBIN:
      return kind == ImageKind::kCubin;
    case CU_JIT_INPUT_PTX:
      return kind == ImageKind::kPtx;
    case CU_JIT_INPUT_FATBINARY:
      return kind == ImageKind::kFatbin || kind == ImageKind::kFatbinWrapper;
    default:
      return false;
  }
}

CUresult add_input(CUlinkState state, CUjitInputType type, ImageBytes bytes, unsigned count,
                   CUjit_option* options, void** values) {
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(state, kLinkMagic), CUDA_ERROR_INVALID_HANDLE);
  FAKECUDA_REQUIRE(type >= CU_JIT_INPUT_CUBIN && type < CU_JIT_NUM_INPUT_TYPES,
                   CUDA_ERROR_INVALID_VALUE);
  if (CUresult r = apply_jit_options(count, options, values); r != CUDA_SUCCESS) return r;
  if (type == CU_JIT_INPUT_OBJECT || type == CU_JIT_INPUT_LIBRARY || type == CU_JIT_INPUT_NVVM)
    return CUDA_ERROR_NOT_SUPPORTED;
  FAKECUDA_REQUIRE(live_context(state->ctx), CUDA_ERROR_INVALID_CONTEXT);
  if (!matches(type, image_kind(bytes))) return CUDA_ERROR_INVALID_IMAGE;
  Image input;
  if (CUresult r = read_image_for_device(bytes, state->ctx->ordinal, &input); r != CUDA_SUCCESS)
    return r;
  // A kernel defined twice is the linker's "multiple definition" error.
  for (const KernelImage& kernel : input.kernels)
    for (const KernelImage& have : state->linked.kernels)
      if (kernel.name == have.name) return CUDA_ERROR_INVALID_IMAGE;
  Image& linked = state->linked;
  linked.kernels.insert(linked.kernels.end(), input.kernels.begin(), input.kernels.end());
  for (const GlobalImage& var : input.globals) {
    auto same = std::find_if(linked.globals.begin(), linked.globals.end(),
                             [&](const GlobalImage& have) { return have.name == var.name; });
    if (same == linked.globals.end()) linked.globals.push_back(var);
  }
  linked.code_bytes += input.code_bytes;
  ++state->inputs;
  return CUDA_SUCCESS;
}

CUresult link_create(unsigned int numOptions, CUjit_option* options, void** optionValues,
                     CUlinkState* stateOut) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(stateOut, CUDA_ERROR_INVALID_VALUE);
  if (CUresult r = apply_jit_options(numOptions, options, optionValues); r != CUDA_SUCCESS)
    return r;
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  auto* state = new CUlinkState_st{};
  state->magic = kLinkMagic;
  state->ctx = ctx;
  d.live.insert(state);
  *stateOut = state;
  return CUDA_SUCCESS;
}

CUresult link_add_data(CUlinkState state, CUjitInputType type, void* data, size_t size,
                       unsigned int numOptions, CUjit_option* options, void** optionValues) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(data && size > 0, CUDA_ERROR_INVALID_VALUE);
  return add_input(state, type, ImageBytes{static_cast<const unsigned char*>(data), size, true},
                   numOptions, options, optionValues);
}

CUresult link_add_file(CUlinkState state, CUjitInputType type, const char* path,
                       unsigned int numOptions, CUjit_option* options, void** optionValues) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(path, CUDA_ERROR_INVALID_VALUE);
  std::ifstream in(path, std::ios::binary);
  FAKECUDA_REQUIRE(in, CUDA_ERROR_FILE_NOT_FOUND);
  std::stringstream contents;
  contents << in.rdbuf();
  const std::string bytes = contents.str();
  FAKECUDA_REQUIRE(!bytes.empty(), CUDA_ERROR_INVALID_IMAGE);
  return add_input(
      state, type,
      ImageBytes{reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), true},
      numOptions, options, optionValues);
}

}  // namespace

FAKECUDA_EXPORT CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option* options,
                                         void** optionValues, CUlinkState* stateOut) {
  return link_create(numOptions, options, optionValues, stateOut);
}

FAKECUDA_EXPORT CUresult cuLinkCreate(unsigned int numOptions, CUjit_option* options,
                                      void** optionValues, CUlinkState* stateOut) {
  return link_create(numOptions, options, optionValues, stateOut);
}

FAKECUDA_EXPORT CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void* data,
                                          size_t size, const char*, unsigned int numOptions,
                                          CUjit_option* options, void** optionValues) {
  return link_add_data(state, type, data, size, numOptions, options, optionValues);
}

FAKECUDA_EXPORT CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void* data,
                                       size_t size, const char*, unsigned int numOptions,
                                       CUjit_option* options, void** optionValues) {
  return link_add_data(state, type, data, size, numOptions, options, optionValues);
}

FAKECUDA_EXPORT CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char* path,
                                          unsigned int numOptions, CUjit_option* options,
                                          void** optionValues) {
  return link_add_file(state, type, path, numOptions, options, optionValues);
}

FAKECUDA_EXPORT CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char* path,
                                       unsigned int numOptions, CUjit_option* options,
                                       void** optionValues) {
  return link_add_file(state, type, path, numOptions, options, optionValues);
}

FAKECUDA_EXPORT CUresult cuLinkComplete(CUlinkState state, void** cubinOut, size_t* sizeOut) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(cubinOut && sizeOut, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(state, kLinkMagic), CUDA_ERROR_INVALID_HANDLE);
  FAKECUDA_REQUIRE(state->inputs > 0, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(live_context(state->ctx), CUDA_ERROR_INVALID_CONTEXT);
  unsigned major = 0, minor = 0;
  device_capability(state->ctx->ordinal, &major, &minor);
  state->output = interface_ptx(state->linked, major, minor);
  *cubinOut = state->output.data();
  *sizeOut = state->output.size() + 1;  // the terminator is part of a PTX image
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuLinkDestroy(CUlinkState state) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(state, kLinkMagic), CUDA_ERROR_INVALID_HANDLE);
  d.live.erase(state);
  delete state;
  return CUDA_SUCCESS;
}
