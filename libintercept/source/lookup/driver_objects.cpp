// Recognising the driver and NVML among loaded objects.
#include "lookup/driver_objects.h"

#include <dlfcn.h>

#include <cstring>
#include <string_view>

#include "lookup/real_loader.h"

namespace gpulimit::lookup {
namespace {

constexpr std::string_view kDriverName = "libcuda.so";
constexpr std::string_view kNvmlName = "libnvidia-ml.so";

Library library_named(std::string_view name) {
  if (const size_t slash = name.rfind('/'); slash != std::string_view::npos)
    name.remove_prefix(slash + 1);
  if (name.starts_with(kDriverName)) return Library::kDriver;
  if (name.starts_with(kNvmlName)) return Library::kNvml;
  return Library::kOther;
}

const char* soname_of(const link_map* object) {
  if (!object->l_ld) return nullptr;
  uintptr_t strings = 0, soname = 0;
  bool has_soname = false;
  for (const ElfW(Dyn)* d = object->l_ld; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_STRTAB) strings = d->d_un.d_ptr;
    if (d->d_tag == DT_SONAME) soname = d->d_un.d_val, has_soname = true;
  }
  if (!strings || !has_soname) return nullptr;
  // Relocated in place by the loader, except in a read-only dynamic section.
  if (strings < object->l_addr) strings += object->l_addr;
  return reinterpret_cast<const char*>(strings + soname);
}

// The object `name` resolves to in this namespace, without loading it.
const link_map* loaded_as(const char* name) {
  if (!loader::find_next()) return nullptr;
  void* handle = gpulimit_next_dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) return nullptr;
  dlclose(handle);  // NOLOAD took a reference; the object stays loaded
  return static_cast<const link_map*>(handle);
}

}  // namespace

Library library_of(const link_map* object) {
  if (!object) return Library::kOther;
  if (object->l_name) {
    if (Library by_file = library_named(object->l_name); by_file != Library::kOther) return by_file;
  }
  const char* soname = soname_of(object);
  return soname ? library_named(soname) : Library::kOther;
}

bool is_forwarded_to(const link_map* object) {
  switch (library_of(object)) {
    case Library::kDriver:
      return object == loaded_as("libcuda.so.1");
    case Library::kNvml:
      return object == loaded_as("libnvidia-ml.so.1");
    case Library::kOther:
      break;
  }
  return false;
}

}  // namespace gpulimit::lookup
