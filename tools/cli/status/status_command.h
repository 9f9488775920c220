// `gpulimit status [--json]`: what the gpulimitd a job would use knows of
// its devices and tenants. It never starts a server.
#pragma once

#include <string_view>
#include <vector>

namespace gpulimit::cli {

// Exit statuses of `gpulimit status` other than 0.
inline constexpr int kExitNoServer = 1;  // none runs, or it failed to answer
inline constexpr int kExitStatusUsage = 2;

// Prints the status to stdout, as tables or (`json`) as the server's JSON
// unchanged, and returns 0; else one line on stderr and an exit status.
// `envp` is the caller's environment (GPULIMIT_SOCKET, XDG_RUNTIME_DIR).
int show_status(char* const* envp, bool json);

// `args` are the words after "status": show_status, or --help's page, or
// one line on stderr and kExitStatusUsage for a malformed command line.
int run_status(const std::vector<std::string_view>& args, char* const* envp);

}  // namespace gpulimit::cli
