// `gpulimit preload enable|disable|status`: whether every program on the
// machine starts with libgpulimit.so preloaded, through /etc/ld.so.preload.
// Opt-in and root only; the library is checked before any program is
// given it, and the file is replaced whole, its other entries untouched.
#pragma once

#include <string_view>
#include <vector>

namespace gpulimit::cli {

// `args` are the words after "preload". Prints one line (stdout on
// success, stderr on failure) and returns the exit status: 0 done (or
// nothing to do), 1 refused or failed with the file as it was, 2 a
// malformed command line.
int run_preload_command(const std::vector<std::string_view>& args);

}  // namespace gpulimit::cli
