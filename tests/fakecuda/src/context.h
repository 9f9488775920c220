// Context lifecycle shared by the context and primary-context entry points.
#pragma once

#include <mutex>

#include "driver.h"

namespace fakecuda {

// Creates a context on `ordinal`, charging its device memory (caller holds
// Driver::mu). CUDA_ERROR_OUT_OF_MEMORY when the device cannot hold it.
CUresult create_context_locked(CUdevice ordinal, unsigned flags, bool primary, CUctx_st** out);

// Waits for the context's work, then frees everything it owns.
void destroy_context(std::unique_lock<std::mutex>& lock, CUctx_st* ctx);

// The current context, or the error the real driver gives without one.
CUresult current_context_checked(CUctx_st** out);

}  // namespace fakecuda
