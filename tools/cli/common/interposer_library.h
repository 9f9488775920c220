// Which libgpulimit.so the job preloads.
#pragma once

#include <string>

namespace gpulimit::cli {

// The absolute path of libgpulimit.so, the first that exists of:
//  - $GPULIMIT_LIBRARY, when set (then it must exist);
//  - <directory of gpulimit>/../lib/libgpulimit.so, the installed layout;
//  - the library of gpulimit's build tree, for a gpulimit run from there.
// False with `error` set to one line when there is none.
bool find_interposer_library(std::string& path, std::string& error);

}  // namespace gpulimit::cli
