// The values the workloads accept, for parameterised tests.
#pragma once

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace integration {

inline const std::vector<std::string> kAccessPaths = {"linked", "dlsym", "proc", "proc-v2"};
inline const std::vector<std::string> kStreamModes = {"legacy", "per-thread"};
inline const std::vector<std::string> kAllocationPaths = {
    "linear", "pitch", "managed", "async", "pool", "vmm", "array", "array3d", "mipmap"};
inline const std::vector<std::string> kLaunchPaths = {"kernel", "kernel-ex", "cooperative",
                                                      "graph-capture", "graph-explicit"};

// "proc-v2" -> "proc_v2": GoogleTest parameter names allow [A-Za-z0-9_] only.
inline std::string test_name(std::string value) {
  std::replace(value.begin(), value.end(), '-', '_');
  return value;
}

// Names a test of one (path, access path, stream mode) combination.
struct PathNamer {
  template <typename Info>
  std::string operator()(const Info& info) const {
    const auto& [path, access, stream_mode] = info.param;
    return test_name(path + "_" + access + "_" + stream_mode);
  }
};

}  // namespace integration
