// The trace file every traced process appends to: opened once, at start,
// with O_APPEND, and written one line per write(), so that the lines of
// processes sharing the file stay whole.
#pragma once

#include "gpulimit/cupti_trace/kernel_line.h"

namespace gpulimit::cupti_trace {

class TraceFile {
 public:
  // False, having said why, when `path` cannot be opened for appending.
  bool open(const char* path);
  bool is_open() const { return fd_ >= 0; }
  // False when the line could not be written whole (said once).
  bool append(const TraceLine& line);

 private:
  int fd_ = -1;
  bool write_failed_ = false;
};

}  // namespace gpulimit::cupti_trace
