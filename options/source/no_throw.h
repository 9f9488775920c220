// The API runs inside other people's processes, where an exception must not
// surface: a failed allocation becomes a false return with a fixed message.
#pragma once

#include <string>

namespace gpulimit::options::detail {

template <typename Body>
bool without_exceptions(std::string& error, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    // Short enough for the small-string buffer: assigning cannot allocate.
    error.assign("out of memory");
    return false;
  }
}

}  // namespace gpulimit::options::detail
