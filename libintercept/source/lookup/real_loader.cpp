// Finding the loader's entry points that come after libgpulimit.so. The C
// library's dlsym is read from its dynamic symbol table (GNU hash), the
// default version of the name, as the loader itself would resolve an
// unversioned reference; the others are then asked of that dlsym with
// RTLD_NEXT from here, so that an interposer loaded after gpulimit that
// wraps them stays in the chain.
#include "lookup/real_loader.h"

#include <gnu/libc-version.h>

#include <atomic>
#include <cstdint>

extern "C" {
__attribute__((visibility("hidden"))) void* (*gpulimit_next_dlsym)(void*, const char*) = nullptr;
__attribute__((visibility("hidden"))) void* (*gpulimit_next_dlvsym)(void*, const char*,
                                                                    const char*) = nullptr;
__attribute__((visibility("hidden"))) void* (*gpulimit_next_dlopen)(const char*, int) = nullptr;
__attribute__((visibility("hidden"))) void* (*gpulimit_next_dlmopen)(Lmid_t, const char*,
                                                                     int) = nullptr;
}

namespace gpulimit::loader {
namespace {

std::atomic<bool> found{false};

// strcmp's answer to "equal?", without strcmp: find_next runs before
// ThreadSanitizer's runtime has found the strcmp it intercepts (see
// dlsym_override.cpp), and a call to it would crash.
bool same_name(const char* a, const char* b) {
  while (*a && *a == *b)
    ++a, ++b;
  return *a == *b;
}

uint32_t gnu_hash(const char* name) {
  uint32_t h = 5381;
  for (const unsigned char* c = reinterpret_cast<const unsigned char*>(name); *c; ++c)
    h = h * 33 + *c;
  return h;
}

// The loader relocates the addresses in a dynamic section it may write
// (every x86-64 object); one it may not still holds offsets.
uintptr_t dynamic_address(const link_map* object, ElfW(Addr) value) {
  return value < object->l_addr ? object->l_addr + value : value;
}

// `object`'s definition of `name`, its default version first; nullptr when
// it has none (or no GNU hash table).
void* definition_in(const link_map* object, const char* name) {
  if (!object || !object->l_ld) return nullptr;
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  const uint32_t* hash = nullptr;
  const ElfW(Half)* versions = nullptr;
  for (const ElfW(Dyn)* d = object->l_ld; d->d_tag != DT_NULL; ++d) {
    const uintptr_t at = dynamic_address(object, d->d_un.d_ptr);
    if (d->d_tag == DT_SYMTAB) symbols = reinterpret_cast<const ElfW(Sym)*>(at);
    if (d->d_tag == DT_STRTAB) strings = reinterpret_cast<const char*>(at);
    if (d->d_tag == DT_GNU_HASH) hash = reinterpret_cast<const uint32_t*>(at);
    if (d->d_tag == DT_VERSYM) versions = reinterpret_cast<const ElfW(Half)*>(at);
  }
  if (!symbols || !strings || !hash) return nullptr;
  const uint32_t buckets = hash[0], first_hashed = hash[1], bloom_words = hash[2];
  if (buckets == 0) return nullptr;
  const uint32_t* bucket = reinterpret_cast<const uint32_t*>(
      reinterpret_cast<const ElfW(Addr)*>(hash + 4) + bloom_words);
  const uint32_t* chain = bucket + buckets;
  const uint32_t h = gnu_hash(name);
  void* hidden_version = nullptr;
  for (uint32_t i = bucket[h % buckets]; i >= first_hashed && i != 0; ++i) {
    const uint32_t link = chain[i - first_hashed];
    const ElfW(Sym)& symbol = symbols[i];
    if ((link | 1) == (h | 1) && symbol.st_shndx != SHN_UNDEF && symbol.st_value != 0 &&
        same_name(strings + symbol.st_name, name)) {
      void* address = reinterpret_cast<void*>(object->l_addr + symbol.st_value);
      if (!versions || (versions[i] & 0x8000) == 0) return address;
      if (!hidden_version) hidden_version = address;
    }
    if (link & 1) break;
  }
  return hidden_version;
}

}  // namespace

const link_map* object_at(const void* address) {
  Dl_info info{};
  link_map* object = nullptr;
  if (!address || !dladdr1(address, &info, reinterpret_cast<void**>(&object), RTLD_DL_LINKMAP))
    return nullptr;
  return object;
}

const link_map* this_library() {
  static const link_map* self = object_at(reinterpret_cast<const void*>(&find_next));
  return self;
}

const link_map* dl_library() {
  // Kept in an atomic, not a function-local static, whose guard
  // ThreadSanitizer intercepts: this runs before its runtime is set up.
  static constinit std::atomic<const link_map*> library{nullptr};
  if (const link_map* known = library.load(std::memory_order_acquire)) return known;
  // dlerror lives beside dlsym (libc or libdl) and gpulimit does not
  // define it.
  const link_map* at_dlerror = object_at(reinterpret_cast<const void*>(&dlerror));
  const link_map* found_library =
      definition_in(at_dlerror, "dlsym")
          ? at_dlerror
          : object_at(reinterpret_cast<const void*>(&gnu_get_libc_version));
  library.store(found_library, std::memory_order_release);
  return found_library;
}

bool find_next() {
  if (found.load(std::memory_order_acquire)) return true;
  auto libc_dlsym =
      reinterpret_cast<void* (*)(void*, const char*)>(definition_in(dl_library(), "dlsym"));
  if (!libc_dlsym) return false;
  // Asked from here, RTLD_NEXT means "after libgpulimit.so".
  auto next = [&](const char* name) {
    void* f = libc_dlsym(RTLD_NEXT, name);
    return f ? f : definition_in(dl_library(), name);
  };
  gpulimit_next_dlsym = reinterpret_cast<decltype(gpulimit_next_dlsym)>(next("dlsym"));
  gpulimit_next_dlvsym = reinterpret_cast<decltype(gpulimit_next_dlvsym)>(next("dlvsym"));
  gpulimit_next_dlopen = reinterpret_cast<decltype(gpulimit_next_dlopen)>(next("dlopen"));
  gpulimit_next_dlmopen = reinterpret_cast<decltype(gpulimit_next_dlmopen)>(next("dlmopen"));
  found.store(true, std::memory_order_release);
  return true;
}

bool loaded_before_this_library(const link_map* object) {
  const link_map* self = this_library();
  if (!object || !self || object == self) return false;
  for (const link_map* before = self->l_prev; before; before = before->l_prev)
    if (before == object) return true;
  return false;
}

bool in_base_namespace() {
  static const bool base = [] {
    Lmid_t namespace_id = LM_ID_BASE;
    const link_map* self = this_library();
    if (self && dlinfo(const_cast<link_map*>(self), RTLD_DI_LMID, &namespace_id) != 0) return true;
    return namespace_id == LM_ID_BASE;
  }();
  return base;
}

}  // namespace gpulimit::loader
