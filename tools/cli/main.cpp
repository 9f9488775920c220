// gpulimit: runs a command as a new tenant under GPU limits (run/), unless
// its first argument names one of the subcommands in the table below.
// `gpulimit status` and `gpulimit top` show what the server knows, `gpulimit
// usage` what it recorded;
// `gpulimit preload` has every program on the machine preload the library.
#include <string_view>
#include <vector>

#include "preload/preload_command.h"
#include "run/run_job.h"
#include "status/status_command.h"
#include "top/top_command.h"
#include "usage/usage_command.h"

extern char** environ;

namespace {

namespace cli = gpulimit::cli;

// What each is for: the help page's COMMANDS (common/help_text.cpp).
struct Subcommand {
  std::string_view name;  // the first argument that names it
  // `args` are the words after the name; `envp` the caller's environment.
  // Returns the exit status.
  int (*run)(const std::vector<std::string_view>& args, char* const* envp);
};

// A subcommand is found only as the first argument: `gpulimit -- status`
// and `gpulimit --mem 1G status` run a program called status.
constexpr Subcommand kSubcommands[] = {
    {"status", cli::run_status},
    {"top", cli::run_top},
    {"usage", cli::run_usage},
    // It edits /etc/ld.so.preload, and reads no limits from the environment.
    {"preload", [](const std::vector<std::string_view>& args,
                   char* const*) { return cli::run_preload_command(args); }},
};

const Subcommand* find_subcommand(int argc, char** argv) {
  if (argc < 2) return nullptr;
  for (const Subcommand& subcommand : kSubcommands)
    if (subcommand.name == argv[1]) return &subcommand;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (const Subcommand* subcommand = find_subcommand(argc, argv))
    return subcommand->run(std::vector<std::string_view>(argv + 2, argv + argc), environ);
  return cli::run_job(argc, argv, environ);
}
