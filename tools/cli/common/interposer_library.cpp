#include "common/interposer_library.h"

#include "build_config.h"
#include "common/installed_file.h"

namespace gpulimit::cli {

bool find_interposer_library(std::string& path, std::string& error) {
  static constexpr InstalledFile kLibrary{
      .name = "libgpulimit.so",
      .override_variable = "GPULIMIT_LIBRARY",
      .installed = "../lib/libgpulimit.so",
      .build_tree = GPULIMIT_BUILD_TREE_LIBRARY,
  };
  return find_installed_file(kLibrary, path, error);
}

}  // namespace gpulimit::cli
