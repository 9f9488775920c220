#include "trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace fakecuda {

Tracer::Tracer(const std::string& path) : pid_(getpid()) {
  if (path.empty()) return;
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd_ < 0)
    std::fprintf(stderr, "fakecuda: cannot open FAKECUDA_TRACE=%s: %s\n", path.c_str(),
                 std::strerror(errno));
}

void Tracer::kernel(uint32_t device, uint64_t stream, uint64_t start_ns, uint64_t end_ns,
                    const std::string& name) {
  if (fd_ < 0) return;
  // One write per line: O_APPEND keeps lines of concurrent processes whole.
  char line[512];
  int n = std::snprintf(line, sizeof(line), "%d %u %llu %llu %llu %.400s\n", static_cast<int>(pid_),
                        device, static_cast<unsigned long long>(stream),
                        static_cast<unsigned long long>(start_ns),
                        static_cast<unsigned long long>(end_ns), name.c_str());
  if (n > 0) {
    ssize_t ignored = write(fd_, line, static_cast<size_t>(n));
    (void)ignored;
  }
}

}  // namespace fakecuda
