// The dynamic loader's own entry points (dlsym, dlvsym, dlopen, dlmopen):
// the definitions that come after libgpulimit.so, which gpulimit's
// overrides hand their calls to. gpulimit defines all four names, so it
// cannot ask for them by name without being answered by itself; the first
// is found in the C library's symbol table directly.
#pragma once

#include <dlfcn.h>
#include <link.h>

extern "C" {
// Filled by gpulimit::loader::find_next(); read by the entry points in
// dlsym_override.cpp and dlopen_override.cpp, which jump to them.
extern void* (*gpulimit_next_dlsym)(void*, const char*);
extern void* (*gpulimit_next_dlvsym)(void*, const char*, const char*);
extern void* (*gpulimit_next_dlopen)(const char*, int);
extern void* (*gpulimit_next_dlmopen)(Lmid_t, const char*, int);
}

namespace gpulimit::loader {

// Fills the four pointers above, once; cheap after the first call, lock-free
// and allocation-free (it runs under the loader's lock). False when the C
// library's dlsym cannot be found (then nothing is filled).
bool find_next();

// The object that holds the code at `address` (nullptr when none does).
const link_map* object_at(const void* address);

// libgpulimit.so itself (this copy of it).
const link_map* this_library();

// The object that defines the C library's dlsym (libc.so.6 since glibc
// 2.34, libdl.so.2 before).
const link_map* dl_library();

// True when `object` comes before libgpulimit.so in the load order of its
// namespace: the program and the libraries preloaded ahead of gpulimit.
bool loaded_before_this_library(const link_map* object);

// True when this copy of libgpulimit.so lives in the program's own
// namespace (LM_ID_BASE), false in a namespace made by dlmopen.
bool in_base_namespace();

}  // namespace gpulimit::loader
