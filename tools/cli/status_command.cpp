#include "status_command.h"

#include <unistd.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "gpulimit/options/option_table.h"
#include "gpulimit/options/values.h"
#include "server_choice.h"
#include "status_client.h"
#include "status_table.h"

namespace gpulimit::cli {
namespace {

int fail(int status, const std::string& message) {
  std::fprintf(stderr, "gpulimit: %s\n", message.c_str());
  return status;
}

}  // namespace

// Only the socket matters here, not the limits the other variables give.
bool caller_socket(char* const* envp, std::string& socket, std::string& error) {
  const std::string_view name = options::option(options::OptionId::kSocket).variable;
  for (char* const* entry = envp; entry && *entry; ++entry) {
    const std::string_view assignment(*entry);
    if (assignment.size() <= name.size() || !assignment.starts_with(name) ||
        assignment[name.size()] != '=') {
      continue;
    }
    const std::string_view value = assignment.substr(name.size() + 1);
    std::string reason;
    if (!value.empty() && !options::parse_socket_path(value, reason)) {
      error = std::string(assignment) + ": " + reason;
      return false;
    }
    socket = value;
    return true;  // the first counts, as with getenv
  }
  return true;
}

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

}  // namespace gpulimit::cli
