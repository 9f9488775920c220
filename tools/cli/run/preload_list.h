// LD_PRELOAD for a job: libgpulimit.so first, so that its hooks come before
// those of anything else preloaded, and no second copy of it.
#pragma once

#include <string>
#include <string_view>

namespace gpulimit::cli {

// `library` (an absolute path), then the entries of `current` in their
// order, separated by ':'. `current` is split as the loader splits it, on
// spaces and colons. Left out as another copy of the interposer, which
// would count every allocation a second time: an entry naming the same file
// as `library`, and any file called libgpulimit.so.
std::string preload_with(const std::string& library, std::string_view current);

}  // namespace gpulimit::cli
