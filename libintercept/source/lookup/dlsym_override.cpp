// dlsym and dlvsym: a program that dlopens libcuda.so.1 and looks up
// cuMemAlloc_v2 gets the real driver's function, which a preloaded library
// cannot interpose. So gpulimit answers these lookups itself for the exact
// names it defines (its hooks and its loader overrides), and hands every
// other lookup to the real function.
//
// A lookup through a handle is answered with gpulimit's definition when the
// real lookup lands in the driver or NVML (any copy of it, reached through
// any handle: the driver's own, a library that depends on it) or, for a
// loader entry point, in the C library. A lookup that lands anywhere else is
// answered with what it found: a second interposer that looks up its backend
// by handle gets its backend, not gpulimit's hook (which would call the
// interposer again, without end). So does the driver gpulimit forwards to
// when it looks up what it forwards to.
//
// RTLD_DEFAULT and RTLD_NEXT depend on the caller, found from the return
// address, so the real function is reached by a tail jump: calling it from
// here would make "next" relative to gpulimit, and an interposer loaded
// after us that asks dlsym(RTLD_NEXT, "malloc") would find itself. Two
// answers are given here instead:
// - RTLD_NEXT asked by an object loaded after gpulimit (a library preloaded
//   behind it, any library dlopened later) for a name gpulimit hooks would
//   find the driver: it gets the hook, which sits below every such caller.
//   For a loader entry point it gets gpulimit's only when the C library's
//   comes next to gpulimit, so that a chain of interposers of dlopen stays
//   a chain.
// - dlvsym passes over gpulimit's unversioned definitions (glibc looks for
//   the version asked and skips the base version), so dlvsym(RTLD_DEFAULT)
//   is asked from here (the global scope is the same for every caller that
//   gpulimit lets load), and dlvsym(RTLD_NEXT) from an object before
//   gpulimit answers gpulimit's definition, as dlsym would.
//
// No lock, no allocation: this runs under the loader's lock during
// `import torch`.
#include <dlfcn.h>

#include <cstring>

#include "lookup/driver_objects.h"
#include "lookup/hook_table.h"
#include "lookup/real_loader.h"

extern "C" void* gpulimit_dlopen_entry(const char*, int);
extern "C" void* gpulimit_dlmopen_entry(Lmid_t, const char*, int);
extern "C" void* gpulimit_dlsym_entry(void*, const char*);
extern "C" void* gpulimit_dlvsym_entry(void*, const char*, const char*);

namespace {

using gpulimit::lookup::Library;

enum class Kind { kNone, kHook, kLoader };

struct Definition {
  Kind kind = Kind::kNone;
  void* address = nullptr;
  void* next = nullptr;  // of a loader entry point: what gpulimit's calls
};

// gpulimit's own definition of `name`, if it has one.
Definition ours(const char* name) {
  if (!name) return {};
  if (name[0] == 'd' && name[1] == 'l') {
    auto entry = [](auto* mine, auto* next) {
      return Definition{Kind::kLoader, reinterpret_cast<void*>(mine),
                        reinterpret_cast<void*>(next)};
    };
    if (std::strcmp(name, "dlopen") == 0)
      return entry(&gpulimit_dlopen_entry, gpulimit_next_dlopen);
    if (std::strcmp(name, "dlmopen") == 0)
      return entry(&gpulimit_dlmopen_entry, gpulimit_next_dlmopen);
    if (std::strcmp(name, "dlsym") == 0) return entry(&gpulimit_dlsym_entry, gpulimit_next_dlsym);
    if (std::strcmp(name, "dlvsym") == 0)
      return entry(&gpulimit_dlvsym_entry, gpulimit_next_dlvsym);
    return {};
  }
  if (void* hook = gpulimit::hook_for_symbol(name)) return {Kind::kHook, hook};
  return {};
}

// What a lookup that found `found` answers, given gpulimit's definition of
// the name and the object that asked.
void* answer_for(void* found, Definition mine, const link_map* caller) {
  const link_map* found_in = gpulimit::loader::object_at(found);
  switch (mine.kind) {
    case Kind::kHook:
      if (gpulimit::lookup::library_of(found_in) == Library::kOther) return found;
      break;
    case Kind::kLoader:
      if (found_in != gpulimit::loader::dl_library()) return found;
      break;
    case Kind::kNone:
      return found;
  }
  return gpulimit::lookup::is_forwarded_to(caller) ? found : mine.address;
}

// What RTLD_NEXT answers `caller` for a name gpulimit defines; nullptr
// leaves the answer to the real function. `versioned`: dlvsym, which would
// pass over gpulimit's definition even where it comes next.
void* next_answer(Definition mine, const link_map* caller, bool versioned) {
  if (gpulimit::loader::loaded_before_this_library(caller))
    return versioned ? mine.address : nullptr;
  if (gpulimit::lookup::is_forwarded_to(caller)) return nullptr;
  if (mine.kind == Kind::kLoader &&
      gpulimit::loader::object_at(mine.next) != gpulimit::loader::dl_library())
    return nullptr;
  return mine.address;
}

#if defined(GPULIMIT_THREAD_SANITIZER) || defined(GPULIMIT_ADDRESS_SANITIZER)
#if defined(GPULIMIT_THREAD_SANITIZER)
extern "C" void __tsan_init();
#define GPULIMIT_SANITIZER_INIT __tsan_init
#else
extern "C" void __asan_init();
#define GPULIMIT_SANITIZER_INIT __asan_init
#endif

// Whether `return_address` is in the sanitizer's runtime (ThreadSanitizer's
// or AddressSanitizer's), which looks up the functions it intercepts while
// it sets itself up: those lookups are handed on unchanged (the runtime
// wants what comes after it, as RTLD_NEXT from it finds), before anything
// here calls what the runtime intercepts (strcmp; a function-local static's
// guard). find_next, called first, calls neither.
bool asked_by_the_sanitizer(const void* return_address) {
  const link_map* runtime =
      gpulimit::loader::object_at(reinterpret_cast<const void*>(&GPULIMIT_SANITIZER_INIT));
  return runtime && gpulimit::loader::object_at(return_address) == runtime;
}
#else
bool asked_by_the_sanitizer(const void*) {
  return false;
}
#endif

}  // namespace

extern "C" {

// nullptr: hand the call to the next dlsym, unchanged.
__attribute__((visibility("hidden"))) void* gpulimit_dlsym_answer(void* handle, const char* name,
                                                                  const void* return_address) {
  if (!gpulimit::loader::find_next() || handle == RTLD_DEFAULT ||
      asked_by_the_sanitizer(return_address))
    return nullptr;
  const Definition mine = ours(name);
  if (mine.kind == Kind::kNone) return nullptr;
  const link_map* caller = gpulimit::loader::object_at(return_address);
  if (caller == gpulimit::loader::this_library()) return nullptr;  // our own lookups
  if (handle == RTLD_NEXT) return next_answer(mine, caller, false);
  void* found = gpulimit_next_dlsym(handle, name);
  if (!found) return nullptr;  // the next dlsym says why, to dlerror
  return answer_for(found, mine, caller);
}

// nullptr: hand the call to the next dlvsym, unchanged.
__attribute__((visibility("hidden"))) void* gpulimit_dlvsym_answer(void* handle, const char* name,
                                                                   const char* version,
                                                                   const void* return_address) {
  if (!gpulimit::loader::find_next() || asked_by_the_sanitizer(return_address)) return nullptr;
  const Definition mine = ours(name);
  if (mine.kind == Kind::kNone) return nullptr;
  const link_map* caller = gpulimit::loader::object_at(return_address);
  if (caller == gpulimit::loader::this_library()) return nullptr;  // our own lookups
  if (handle == RTLD_NEXT) return next_answer(mine, caller, true);
  void* found = gpulimit_next_dlvsym(handle, name, version);
  if (!found) return nullptr;
  return answer_for(found, mine, caller);
}

}  // extern "C"

#if defined(__x86_64__)
// void* dlsym(void* handle, const char* name)
// void* dlvsym(void* handle, const char* name, const char* version)
// Each asks its answer function, with the caller's return address, and
// returns the answer, or jumps to the next definition with the caller's
// arguments and return address intact.
asm(R"(
    .text
    .globl  dlsym
    .type   dlsym, @function
    .globl  gpulimit_dlsym_entry
    .hidden gpulimit_dlsym_entry
dlsym:
gpulimit_dlsym_entry:
    .cfi_startproc
    pushq   %rdi
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    subq    $8, %rsp
    .cfi_adjust_cfa_offset 8
    movq    24(%rsp), %rdx
    call    gpulimit_dlsym_answer
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    testq   %rax, %rax
    jz      1f
    ret
1:
    jmpq    *gpulimit_next_dlsym(%rip)
    .cfi_endproc
    .size   dlsym, .-dlsym

    .globl  dlvsym
    .type   dlvsym, @function
    .globl  gpulimit_dlvsym_entry
    .hidden gpulimit_dlvsym_entry
dlvsym:
gpulimit_dlvsym_entry:
    .cfi_startproc
    pushq   %rdi
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    pushq   %rdx
    .cfi_adjust_cfa_offset 8
    movq    24(%rsp), %rcx
    call    gpulimit_dlvsym_answer
    popq    %rdx
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    testq   %rax, %rax
    jz      1f
    ret
1:
    jmpq    *gpulimit_next_dlvsym(%rip)
    .cfi_endproc
    .size   dlvsym, .-dlvsym
)");
#else
#error "gpulimit's dlsym entry point is written for x86-64; add the tail jump for this CPU"
#endif
