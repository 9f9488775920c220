#include "gate/background_thread.h"

#include <pthread.h>
#include <signal.h>

#include <new>

namespace gpulimit::gate {
namespace {

struct Start {
  void* (*body)(void*);
  void* arg;
  const char* name;
};

void* run(void* start) {
  const Start s = *static_cast<Start*>(start);
  delete static_cast<Start*>(start);
  pthread_setname_np(pthread_self(), s.name);
  return s.body(s.arg);
}

}  // namespace

bool start_background_thread(void* (*body)(void*), void* arg, const char* name) noexcept {
  auto* start = new (std::nothrow) Start{body, arg, name};
  if (!start) return false;
  pthread_attr_t attributes;
  if (pthread_attr_init(&attributes) != 0) {
    delete start;
    return false;
  }
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  // The drain thread calls into the driver: room for it, but not the 8 MiB
  // default in every process of every tenant.
  pthread_attr_setstacksize(&attributes, 1 << 20);
  // The new thread inherits the creating thread's signal mask.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_t thread;
  const bool started = pthread_create(&thread, &attributes, run, start) == 0;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  pthread_attr_destroy(&attributes);
  if (!started) delete start;
  return started;
}

}  // namespace gpulimit::gate
