// `gpulimit status [--json]`: what the gpulimitd a job would use knows of
// its devices and tenants. It never starts a server.
#pragma once

#include <string>

namespace gpulimit::cli {

// Exit statuses of `gpulimit status` other than 0.
inline constexpr int kExitNoServer = 1;  // none runs, or it failed to answer
inline constexpr int kExitStatusUsage = 2;

// GPULIMIT_SOCKET as the caller set it in `envp` (the first counts, as with
// getenv), checked; empty when unset. False with `error` set to one line
// when it is not a socket path.
bool caller_socket(char* const* envp, std::string& socket, std::string& error);

// Prints the status to stdout, as tables or (`json`) as the server's JSON
// unchanged, and returns 0; else one line on stderr and an exit status.
// `envp` is the caller's environment (GPULIMIT_SOCKET, XDG_RUNTIME_DIR).
int show_status(char* const* envp, bool json);

}  // namespace gpulimit::cli
