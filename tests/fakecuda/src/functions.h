// Functions, modules and libraries as the rest of the driver sees them. A
// CUkernel (a library's context-independent kernel) is accepted wherever the
// API declares a CUfunction, as with the real driver: every entry point that
// takes one resolves it here.
#pragma once

#include "driver.h"

namespace fakecuda {

// The function `handle` names in `ctx` (nullptr: the current context): a
// CUfunction as it is, a CUkernel as its copy in that context, loading the
// library there first if it is not yet (which charges its device memory:
// CUDA_ERROR_OUT_OF_MEMORY when the device is full). CUDA_ERROR_INVALID_HANDLE
// for anything else, CUDA_ERROR_INVALID_CONTEXT for a CUkernel without a
// context. Caller holds Driver::mu.
CUresult resolve_function_locked(CUfunction handle, CUctx_st* ctx, CUfunc_st** out);

// Loads `image` into `ctx` as a module: charges code and variables, places
// the variables with their initial bytes. For a library's module, `library`
// is set and the functions are its kernels' copies. Caller holds Driver::mu.
CUresult load_module_locked(CUctx_st* ctx, const Image& image, CUlib_st* library, CUmod_st** out);

// Gives back what the module holds and deletes it and its functions. The
// module's own entry in Driver::live is the caller's to erase. Caller holds
// Driver::mu.
void destroy_module_locked(CUmod_st* module);

// CUDA_MODULE_LOADING=EAGER: libraries go into every context when created.
void load_libraries_into_locked(CUctx_st* ctx);

// The device's compute capability, for choosing an image's entry.
void device_capability(int ordinal, unsigned* major, unsigned* minor);

// Reads an image the application hands over (no size) or a file's bytes.
CUresult read_image_for_device(ImageBytes bytes, int ordinal, Image* out);

// The parameter layout of a function, for cuFuncGetParamInfo and cuKernelGetParamInfo.
CUresult param_info(const std::vector<uint32_t>& sizes, const std::vector<uint32_t>& offsets,
                    size_t index, size_t* offset, size_t* size);

// cuFuncGetAttribute's answers and cuFuncSetAttribute's checks, shared with
// cuKernelGetAttribute and cuKernelSetAttribute.
CUresult get_function_attribute(const FunctionAttributes& attributes, CUfunction_attribute attrib,
                                int* value);
CUresult set_function_attribute(FunctionAttributes* attributes, CUfunction_attribute attrib,
                                int value);

// Checks JIT options as the driver does and answers their outputs (empty
// logs, no wall time): nothing is compiled.
CUresult apply_jit_options(unsigned count, const CUjit_option* options, void** values);

// The loading mode of this process (CUDA_MODULE_LOADING, read at cuInit).
bool eager_loading();

}  // namespace fakecuda
