// Argument and environment lists as exec and posix_spawn take them, for the
// job gpulimit becomes and the gpulimitd it starts.
#pragma once

#include <string>
#include <vector>

namespace gpulimit::cli {

// `strings` as exec takes an argv or envp: pointers into them, then NULL.
// Valid while `strings` lives unchanged.
std::vector<char*> pointers_to(const std::vector<std::string>& strings);

}  // namespace gpulimit::cli
