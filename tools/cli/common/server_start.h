// Starting the user's own gpulimitd for a job, when none runs.
//
// The server must outlive gpulimit and must not be the job's: gpulimit
// becomes the job (exec), and a job that waits for its children (a shell
// script, torchrun) must never find the server among them. So a helper
// process starts it and exits once it accepts connections: the server is
// then nobody's child but init's (or a subreaper's), in a session of its
// own, with stdin on /dev/null and stdout and stderr in gpulimitd.log beside
// its socket, and no other descriptor of gpulimit's caller (a pipe a shell
// reads to its end, for one).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace gpulimit::cli {

// How long a started server has to accept connections. NVML alone can take
// seconds to start on a machine whose GPUs are not in persistence mode.
inline constexpr std::chrono::seconds kServerStartTimeout{5};

// An on-demand server exits after this long without tenants. Long, because
// a job connects only at its first CUDA call, which may come minutes after
// gpulimit started it (imports, data loading); a server gone by then leaves
// the job without time-slicing.
inline constexpr int kServerIdleExitSeconds = 600;

// The server program (server_program.h) started with `--socket socket
// --idle-exit-s N`, its directory made first (mode 0700) and checked to be
// `uid`'s own. Returns once a server accepts connections at `socket` (maybe
// one another gpulimit started at the same time). False with `error` set to
// one line when the program cannot be found or run, exits first, or does not
// accept connections within kServerStartTimeout (it is then sent SIGTERM).
bool start_server(const std::string& socket, uid_t uid, char* const* envp, std::string& error);

// The environment a server starts in: `envp` less LD_PRELOAD (the server
// must not run under libgpulimit.so), CUDA_VISIBLE_DEVICES (it serves every
// job of the user, whatever devices each sees) and gpulimit's own limits.
std::vector<std::string> server_environment(char* const* envp);

}  // namespace gpulimit::cli
