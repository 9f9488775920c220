// A shared library that ends every program it is loaded into, with status
// 7, before main: what `gpulimit preload enable` must never write into
// /etc/ld.so.preload.
#include <unistd.h>

namespace {

__attribute__((constructor)) void exit_on_load() {
  _exit(7);
}

}  // namespace
