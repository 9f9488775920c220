#include "diagnostics.h"

#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>

namespace gpulimit::cupti_trace {

void say(const char* format, ...) {
  char line[512];
  int prefix = std::snprintf(line, sizeof line, "gpulimit-cupti-trace: ");
  va_list arguments;
  va_start(arguments, format);
  int body = std::vsnprintf(line + prefix, sizeof line - prefix - 1, format, arguments);
  va_end(arguments);
  if (body < 0) body = 0;
  std::size_t size =
      static_cast<std::size_t>(prefix) +
      std::min<std::size_t>(static_cast<std::size_t>(body), sizeof line - prefix - 2);
  line[size++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, size);
  (void)ignored;
}

bool cupti_ok(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return true;
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || !text) text = "unknown error";
  say("%s failed: %s (%d)", call, text, static_cast<int>(result));
  return false;
}

}  // namespace gpulimit::cupti_trace
