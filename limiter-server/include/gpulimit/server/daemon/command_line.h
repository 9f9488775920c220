// gpulimitd's command line (CLI11): what to serve and how to run.
#pragma once

#include <sys/types.h>

#include <string>
#include <variant>

#include "gpulimit/server/daemon/server_config.h"

namespace gpulimit::server {

struct DaemonOptions {
  ServerConfig server;
  bool foreground = false;
  std::string log_file;  // in the background; empty in the foreground
  std::string log_level = "info";
};

// The command line asked for no server: --help, or a mistake. `output` is
// printed as is (to stdout for help, stderr otherwise) and `status` returned.
struct CommandLineExit {
  int status = 0;
  std::string output;
  bool to_stderr = false;
};

// `envp` and `uid` place the per-user socket (protocol::user_socket_path).
std::variant<DaemonOptions, CommandLineExit> parse_command_line(int argc, const char* const* argv,
                                                                char* const* envp, uid_t uid);

}  // namespace gpulimit::server
