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
// there: gpulimit caps the driver of the program's own namespace only.
//
// Both keep the caller's return address: glibc searches the RUNPATH of the
// library that called (found from that address) for a name without a slash,
// so the real functions are reached by a tail jump, never a call from here.
#include <dlfcn.h>

#include <cstdio>

#include "lookup/real_loader.h"

namespace {

// Loads this library as the first object of a new namespace, and returns
// that namespace; -1 when it cannot (then the dlmopen is refused).
Lmid_t new_guarded_namespace() {
  Dl_info self{};
  if (!dladdr(reinterpret_cast<const void*>(&new_guarded_namespace), &self) || !self.dli_fname)
    return -1;
  void* guard = gpulimit_next_dlmopen(LM_ID_NEWLM, self.dli_fname, RTLD_NOW | RTLD_LOCAL);
  Lmid_t made = -1;
  if (!guard || dlinfo(guard, RTLD_DI_LMID, &made) != 0) {
    std::fprintf(stderr,
                 "gpulimit: dlmopen into a new namespace refused: gpulimit cannot guard it (%s)\n",
                 guard ? "no namespace id" : dlerror());
    return -1;
  }
  return made;
}

}  // namespace

extern "C" {

// The flags a dlopen goes ahead with.
__attribute__((visibility("hidden"))) int gpulimit_dlopen_flags(int flags) {
  gpulimit::loader::find_next();
  return flags & ~RTLD_DEEPBIND;
}

// Adjusts a dlmopen's namespace and flags in place; false refuses it.
__attribute__((visibility("hidden"))) bool gpulimit_dlmopen_prepare(Lmid_t* namespace_id,
                                                                    int* flags) {
  if (!gpulimit::loader::find_next()) return false;
  *flags &= ~RTLD_DEEPBIND;
  if (*namespace_id == LM_ID_NEWLM) {
    *namespace_id = new_guarded_namespace();
    if (*namespace_id < 0) return false;
  }
  return true;
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
    leaq    16(%rsp), %rdi
    movq    %rsp, %rsi
    call    gpulimit_dlmopen_prepare
    popq    %rdx
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    testb   %al, %al
    jz      1f
    jmpq    *gpulimit_next_dlmopen(%rip)
1:
    xorl    %eax, %eax
    ret
    .cfi_endproc
    .size   dlmopen, .-dlmopen
)");
#else
#error "gpulimit's dlopen entry point is written for x86-64; add the tail jump for this CPU"
#endif
