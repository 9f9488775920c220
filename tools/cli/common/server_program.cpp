#include "common/server_program.h"

#include "common/installed_file.h"

namespace gpulimit::cli {

bool find_server_program(std::string& path, std::string& error) {
  // GPULIMIT_BUILD_TREE_SERVER comes from tools/cli/CMakeLists.txt: the
  // gpulimitd target's file where the target exists.
  static constexpr InstalledFile kServer{
      .name = "gpulimitd",
      .override_variable = "GPULIMIT_SERVER",
      .installed = "gpulimitd",
      .build_tree = GPULIMIT_BUILD_TREE_SERVER,
      .program = true,
  };
  return find_installed_file(kServer, path, error);
}

}  // namespace gpulimit::cli
