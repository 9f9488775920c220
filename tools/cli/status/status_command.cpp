#include "status/status_command.h"

#include <unistd.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "common/help_text.h"
#include "common/server_choice.h"
#include "common/status_client.h"
#include "status/status_command_line.h"
#include "status/status_table.h"

namespace gpulimit::cli {
namespace {

int fail(int status, const std::string& message) {
  std::fprintf(stderr, "gpulimit: %s\n", message.c_str());
  return status;
}

}  // namespace

int show_status(char* const* envp, bool json) {
  std::string error;
  std::string given;
  if (!caller_socket(envp, given, error)) return fail(kExitStatusUsage, error);
  std::string socket;
  if (!choose_server(server_places(envp, given, getuid()), StartServer::kNo, envp, socket, error))
    return fail(kExitNoServer, "no gpulimitd running (" + error + ")");

  std::string reply;
  if (!request_status(socket, reply, error)) return fail(kExitNoServer, error);
  if (json) {
    if (!reply.empty() && reply.back() != '\n') reply += '\n';
    std::fputs(reply.c_str(), stdout);
    return 0;
  }
  std::string table;
  if (!render_status_table(reply, table, error)) return fail(kExitNoServer, error);
  std::fputs(table.c_str(), stdout);
  return 0;
}

int run_status(const std::vector<std::string_view>& args, char* const* envp) {
  StatusOptions options;
  std::string error;
  if (!parse_status_arguments(args, options, error)) return fail(kExitStatusUsage, error);
  if (options.help) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  return show_status(envp, options.json);
}

}  // namespace gpulimit::cli
