#include "trace_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "diagnostics.h"

namespace gpulimit::cupti_trace {

bool TraceFile::open(const char* path) {
  // O_CLOEXEC: a program the process execs is traced by its own copy of the
  // library (LD_PRELOAD is inherited), which opens the file itself.
  fd_ = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd_ < 0) say("cannot open %s: %s; not tracing", path, std::strerror(errno));
  return fd_ >= 0;
}

bool TraceFile::append(const TraceLine& line) {
  ssize_t written;
  do {
    written = ::write(fd_, line.bytes, line.size);
  } while (written < 0 && errno == EINTR);
  if (written == static_cast<ssize_t>(line.size)) return true;
  // A short write (a full disk) leaves a partial line; say so once rather
  // than once per kernel.
  if (!write_failed_) {
    write_failed_ = true;
    say("writing the trace failed: %s", written < 0 ? std::strerror(errno) : "short write");
  }
  return false;
}

}  // namespace gpulimit::cupti_trace
