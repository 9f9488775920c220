// What a fuzzer asserts beyond "no crash, no sanitizer report": FUZZ_CHECK
// aborts with the condition and its place whatever the build type (assert
// would vanish under NDEBUG), so libFuzzer keeps the input that broke it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

#define FUZZ_CHECK(condition)                                                                 \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

namespace gpulimit::fuzz {

// What a user is told must be one line they can read: not empty, and no
// control character (a newline would split a log line, an escape sequence
// would reach their terminal).
inline bool one_readable_line(std::string_view text) {
  if (text.empty()) return false;
  for (const char c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace gpulimit::fuzz
