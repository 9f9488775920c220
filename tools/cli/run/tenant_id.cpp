#include "run/tenant_id.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace gpulimit::cli {

bool new_tenant_id(std::string& out, std::string& error) {
  uint64_t random = 0;
  ssize_t got = -1;
  do {
    got = getrandom(&random, sizeof(random), 0);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof(random))) {
    error = std::string("cannot make a tenant id: getrandom: ") +
            (got < 0 ? std::strerror(errno) : "short read");
    return false;
  }
  char id[64];
  std::snprintf(id, sizeof(id), "%u-%d-%016llx", static_cast<unsigned>(getuid()),
                static_cast<int>(getpid()), static_cast<unsigned long long>(random));
  out = id;
  return true;
}

}  // namespace gpulimit::cli
