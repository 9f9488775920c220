// `gpulimit top`: a live view of what the gpulimitd a job would use knows,
// refreshed every --interval seconds. On a terminal, a full-screen view with
// keys to sort and quit; with --batch, plain text frames on stdout for
// scripts. It never starts a server: one that is not there, or goes away,
// is shown as "no server" and asked again at the next refresh.
#pragma once

#include <string_view>
#include <vector>

namespace gpulimit::cli {

// Exit statuses of `gpulimit top` other than 0 (quit, or the frames asked
// for shown).
// --batch: the last frame had no server's status; the view: the terminal
// went away.
inline constexpr int kExitTopFailure = 1;
inline constexpr int kExitTopUsage = 2;

// `args` are the words after "top"; `envp` the caller's environment
// (GPULIMIT_SOCKET, XDG_RUNTIME_DIR, COLUMNS).
int run_top(const std::vector<std::string_view>& args, char* const* envp);

}  // namespace gpulimit::cli
