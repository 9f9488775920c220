// A library whose constructor calls the program's
// gpulimit_nvml_test_in_constructor(): that code then runs while this thread
// holds the dynamic loader's lock, as code in any library's constructor does.
#include <dlfcn.h>

namespace {

__attribute__((constructor)) void call_back_while_loading() {
  auto callback =
      reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gpulimit_nvml_test_in_constructor"));
  if (callback) callback();
}

}  // namespace
