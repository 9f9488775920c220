// `gpulimit [OPTION...] [--] COMMAND [ARGUMENT...]`: runs COMMAND as a new
// tenant under GPU limits. Everything is checked before anything runs; then
// gpulimit finds (or starts) the gpulimitd that time-slices the GPU, and
// becomes the command.
#pragma once

namespace gpulimit::cli {

// `argc` and `argv` are main's, `envp` the caller's environment. Returns
// only when COMMAND could not be run (126, 127 as a shell), on a mistake
// (2, one line on stderr, nothing run) or for --help and --version (0).
int run_job(int argc, char** argv, char** envp);

}  // namespace gpulimit::cli
