// Lookups over GPULIMIT_DRIVER_HOOKS: what dlsym and cuGetProcAddress answer.
// Both run inside other libraries' lookups (import torch does thousands of
// dlsyms), so they take no lock and allocate nothing: the tables are
// computed at compile time.
#pragma once

#include <cuda.h>

namespace gpulimit {

// Our hook for the exported name `symbol` ("cuMemAlloc_v2"), or nullptr
// when gpulimit does not hook it. Exact names only.
void* hook_for_symbol(const char* symbol);

// What cuGetProcAddress hands the caller: given the base name, the pointer
// the real driver answered with, the version and flags asked for, our hook
// of exactly that variant (same signature, same default-stream semantics),
// or `real` itself for a function gpulimit does not hook. The variant is
// recognised by the address (the driver answers with its exported
// functions), else by the version/flag rules; the real pointer is kept in
// that variant's slot.
void* hook_for_proc_address(const char* base, void* real, int version, cuuint64_t flags);

}  // namespace gpulimit
