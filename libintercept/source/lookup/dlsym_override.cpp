// dlsym: a program that dlopens libcuda.so.1 and looks up cuMemAlloc_v2 gets
// the real driver's function, which a preloaded library cannot interpose. So
// gpulimit answers dlsym itself for the exact names it hooks, and hands every
// other lookup to the real dlsym.
//
// The hand-over must be a tail jump. glibc resolves RTLD_NEXT relative to the
// object that called dlsym, found from the return address; calling the real
// dlsym from here would make "next" relative to gpulimit, and an interposer
// loaded after us that asks dlsym(RTLD_NEXT, "malloc") would find itself.
// The entry point below therefore asks gpulimit_dlsym_answer, and when that
// has no answer, jumps to the real dlsym with the caller's arguments and
// return address intact. No lock, no allocation: this runs under the
// loader's lock during `import torch`.
#include <dlfcn.h>

#include "lookup/hook_table.h"
#include "lookup/real_driver.h"

extern "C" {

// The real dlsym, set before the first answer is given.
__attribute__((visibility("hidden"))) void* gpulimit_real_dlsym_ptr = nullptr;

__attribute__((visibility("hidden"))) void* gpulimit_dlsym_answer(void* handle, const char* name) {
  if (!gpulimit_real_dlsym_ptr)
    gpulimit_real_dlsym_ptr = reinterpret_cast<void*>(
        dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34") ? dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34")
                                                 : dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  // Searches of the global scope find our exported hooks already.
  if (handle == RTLD_NEXT || handle == RTLD_DEFAULT) return nullptr;
  return gpulimit::hook_for_symbol(name);
}

}  // extern "C"

#if defined(__x86_64__)
// void* dlsym(void* handle, const char* name)
asm(R"(
    .text
    .globl  dlsym
    .type   dlsym, @function
dlsym:
    .cfi_startproc
    pushq   %rdi
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    subq    $8, %rsp
    .cfi_adjust_cfa_offset 8
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
    jmpq    *gpulimit_real_dlsym_ptr(%rip)
    .cfi_endproc
    .size   dlsym, .-dlsym
)");
#else
#error "gpulimit's dlsym entry point is written for x86-64; add the tail jump for this CPU"
#endif
