// Context lifecycle shared by the context and primary-context entry points.
#pragma once

#include <mutex>

#include "driver.h"

namespace fakecuda {

// Creates a context on `ordinal`, charging its device memory (caller holds
// Driver::mu). CUDA_ERROR_OUT_OF_MEMORY when the device cannot hold it.
CUresult create_context_locked(CUdevice ordinal, unsigned flags, bool primary, CUctx_st** out);

// The object of a device's primary context, inactive (at cuInit).
CUctx_st* new_primary_handle(CUdevice ordinal);

// Whether `ctx` is a primary context's object, active or not.
bool is_primary_handle(const CUctx_st* ctx);

// Destroys a user context: runs its context-local storage destructors
// (without the lock, the context still usable, as they may call the driver),
// then waits for the context's work and frees everything it owns. Returns
// false when another thread destroyed the context while the destructors ran.
bool destroy_context(std::unique_lock<std::mutex>& lock, CUctx_st* ctx);

// The last release or a reset of a primary context: the same, unless the
// context was retained again while the destructors ran (`force`: a reset
// goes on regardless).
void deactivate_primary(std::unique_lock<std::mutex>& lock, size_t ordinal, bool force);

// Calls the storage destructors of `ctx` without holding `lock`.
void run_storage_destructors(std::unique_lock<std::mutex>& lock, CUctx_st* ctx);

// The current context, or the error the real driver gives without one.
CUresult current_context_checked(CUctx_st** out);

}  // namespace fakecuda
