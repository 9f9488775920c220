// dlopen and dlmopen: the two ways a library can be loaded where gpulimit's
// hooks would not come first in its lookups.
//
// RTLD_DEEPBIND makes a library look in itself and its own dependencies
// before the program's global scope, so a library that links libcuda.so.1
// would bind cuMemAlloc_v2 to the driver and never to gpulimit's hook. The
// flag is dropped and the library loads as it would without it: a name the
// program or a preloaded library also defines resolves to theirs, as for any
// other library. Interposers of malloc do the same; sanitizers refuse the
// flag outright.
//
// dlmopen(LM_ID_NEWLM) makes a new namespace, which LD_PRELOAD does not
// reach: a second libcuda.so.1 loaded there would be uncapped. So the new
// namespace gets a copy of libgpulimit.so as its first object, whose
// definitions then come first for every library loaded into it (the first
// object of a namespace holds its global scope), and which refuses CUDA
// there: gpulimit caps the driver of the program's own namespace only. The
// guard is never closed, so such a namespace lasts as long as the process
// (glibc has 16); a path that fails to load hands its namespace on to the
// next dlmopen, a bare name that fails leaves it (the load had to be a tail
// jump, see below).
//
// Both keep the caller's return address: glibc searches the RUNPATH of the
// library that called (found from that address) for a name without a slash,
// so the real functions are reached by a tail jump, never a call from here.
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "lookup/real_loader.h"

namespace {

// A guarded namespace a failed load left empty, for the next to take.
std::atomic<void*> spare_guard{nullptr};

// Loads this library as the first object of a new namespace; nullptr when
// it cannot (then the dlmopen is refused).
void* new_guarded_namespace(Lmid_t* made) {
  if (void* spare = spare_guard.exchange(nullptr)) {
    if (dlinfo(spare, RTLD_DI_LMID, made) == 0) return spare;
  }
  Dl_info self{};
  if (!dladdr(reinterpret_cast<const void*>(&new_guarded_namespace), &self) || !self.dli_fname)
    return nullptr;
  void* guard = gpulimit_next_dlmopen(LM_ID_NEWLM, self.dli_fname, RTLD_NOW | RTLD_LOCAL);
  if (!guard || dlinfo(guard, RTLD_DI_LMID, made) != 0) {
    // dlerror is left to the caller: it says why the guard did not load.
    std::fprintf(stderr,
                 "gpulimit: dlmopen into a new namespace refused: gpulimit cannot load itself "
                 "there to guard it\n");
    if (guard) dlclose(guard);
    return nullptr;
  }
  return guard;
}

// Whether glibc needs the caller to load `file`: a name without a slash is
// searched along the caller's RUNPATH, a dynamic string token ($ORIGIN) is
// the caller's.
bool needs_the_caller(const char* file) {
  return std::strchr(file, '/') == nullptr || std::strchr(file, '$') != nullptr;
}

}  // namespace

extern "C" {

// The flags a dlopen goes ahead with.
__attribute__((visibility("hidden"))) int gpulimit_dlopen_flags(int flags) {
  gpulimit::loader::find_next();
  return flags & ~RTLD_DEEPBIND;
}

// What a dlmopen does: 1, go ahead with *namespace_id and *flags as
// adjusted (a tail jump to the next dlmopen); 0, return *result.
__attribute__((visibility("hidden"))) int gpulimit_dlmopen_prepare(Lmid_t* namespace_id,
                                                                   const char* file, int* flags,
                                                                   void** result) {
  *result = nullptr;
  if (!gpulimit::loader::find_next()) return 0;
  *flags &= ~RTLD_DEEPBIND;
  // glibc refuses a new namespace for the program itself: its own error.
  if (*namespace_id != LM_ID_NEWLM || !file) return 1;
  void* guard = new_guarded_namespace(namespace_id);
  if (!guard) return 0;
  if (needs_the_caller(file)) return 1;  // a failed load leaves the guarded namespace
  // A path: loaded from here, so that a failure leaves its namespace to the
  // next dlmopen rather than behind (closing the guard would clear the
  // error the caller is about to ask dlerror for). The guard, first in the
  // namespace, stays as long as the namespace does.
  *result = gpulimit_next_dlmopen(*namespace_id, file, *flags);
  if (!*result) {
    void* expected = nullptr;
    if (!spare_guard.compare_exchange_strong(expected, guard)) dlclose(guard);
  }
  return 0;
}

}  // extern "C"

#if defined(__x86_64__)
// void* dlopen(const char* file, int flags)
// void* dlmopen(Lmid_t namespace_id, const char* file, int flags)
asm(R"(
    .text
    .globl  dlopen
    .type   dlopen, @function
    .globl  gpulimit_dlopen_entry
    .hidden gpulimit_dlopen_entry
dlopen:
gpulimit_dlopen_entry:
    .cfi_startproc
    pushq   %rdi
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    subq    $8, %rsp
    .cfi_adjust_cfa_offset 8
    movl    %esi, %edi
    call    gpulimit_dlopen_flags
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    movl    %eax, %esi
    jmpq    *gpulimit_next_dlopen(%rip)
    .cfi_endproc
    .size   dlopen, .-dlopen

    .globl  dlmopen
    .type   dlmopen, @function
    .globl  gpulimit_dlmopen_entry
    .hidden gpulimit_dlmopen_entry
dlmopen:
gpulimit_dlmopen_entry:
    .cfi_startproc
    pushq   %rdi
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    pushq   %rdx
    .cfi_adjust_cfa_offset 8
    subq    $16, %rsp
    .cfi_adjust_cfa_offset 16
    leaq    32(%rsp), %rdi
    leaq    16(%rsp), %rdx
    movq    %rsp, %rcx
    call    gpulimit_dlmopen_prepare
    movq    (%rsp), %r8
    addq    $16, %rsp
    .cfi_adjust_cfa_offset -16
    popq    %rdx
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    testl   %eax, %eax
    jz      1f
    jmpq    *gpulimit_next_dlmopen(%rip)
1:
    movq    %r8, %rax
    ret
    .cfi_endproc
    .size   dlmopen, .-dlmopen
)");
#else
#error "gpulimit's dlopen entry point is written for x86-64; add the tail jump for this CPU"
#endif
