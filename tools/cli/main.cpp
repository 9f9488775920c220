// gpulimit: runs a command as a new tenant under GPU limits. Everything is
// checked before anything runs; then gpulimit finds (or starts) the
// gpulimitd that time-slices the GPU, and becomes the command.
// `gpulimit status` and `gpulimit top` show what that server knows.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "build_config.h"
#include "command_line.h"
#include "device_check.h"
#include "gpulimit/options/environment.h"
#include "help_text.h"
#include "interposer_library.h"
#include "job_environment.h"
#include "preload_command.h"
#include "run_command.h"
#include "server_choice.h"
#include "stale_ledgers.h"
#include "status_command.h"
#include "tenant_id.h"
#include "top_command.h"

extern char** environ;

namespace {

constexpr int kExitUsage = 2;
constexpr std::size_t kDeviceMemRow =
    static_cast<std::size_t>(gpulimit::options::OptionId::kDeviceMem);

int fail(const std::string& message) {
  std::fprintf(stderr, "gpulimit: %s\n", message.c_str());
  return kExitUsage;
}

std::optional<std::string_view> variable(const char* name) {
  const char* value = std::getenv(name);
  if (!value) return std::nullopt;
  return value;
}

// Sets `limits.socket` to the server that will time-slice the job, started
// if need be. Without one, a job that asked for GPU time (`asked` names
// how) is refused rather than run without it; any other runs with its
// memory caps only, and is told so in one line.
bool choose_job_server(gpulimit::options::Limits& limits, const std::string& asked,
                       std::string& error) {
  namespace cli = gpulimit::cli;
  std::string socket;
  if (cli::choose_server(cli::server_places(environ, limits.socket, getuid()),
                         cli::StartServer::kOnDemand, environ, socket, error)) {
    limits.socket = socket;
    return true;
  }
  if (!asked.empty()) {
    error = asked + " needs gpulimitd: " + error;
    return false;
  }
  std::fprintf(stderr, "gpulimit: time-slicing is off, memory caps only: %s\n", error.c_str());
  limits.socket.clear();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  namespace cli = gpulimit::cli;
  namespace options = gpulimit::options;

  // `gpulimit preload ...` edits /etc/ld.so.preload, and shares nothing
  // with running a job.
  if (argc >= 2 && std::string_view(argv[1]) == "preload")
    return cli::run_preload_command(std::vector<std::string_view>(argv + 2, argv + argc));
  // `gpulimit top ...`: the live view of what the server knows.
  if (argc >= 2 && std::string_view(argv[1]) == "top")
    return cli::run_top(std::vector<std::string_view>(argv + 2, argv + argc), environ);

  cli::Invocation invocation;
  std::string error;
  if (!cli::parse_command_line(argc, argv, invocation, error)) return fail(error);
  if (invocation.help) {
    std::fputs(cli::help_text().c_str(), stdout);
    return EXIT_SUCCESS;
  }
  if (invocation.version) {
    std::printf("gpulimit %s\n", GPULIMIT_VERSION);
    return EXIT_SUCCESS;
  }
  if (invocation.status) return cli::show_status(environ, invocation.json);

  // The limits exactly as every process of the job will read them.
  const options::FlagValues flags = invocation.flag_values();
  options::Limits limits;
  if (!options::limits_from_command_line(environ, flags, limits, error)) return fail(error);
  std::string asked;
  if (!options::compute_limits_asked(environ, flags, asked)) asked.clear();
  if (invocation.no_server && !asked.empty()) {
    return fail(asked + ": a limit of GPU time needs gpulimitd, and --no-server runs without it");
  }
  std::string library;
  if (!cli::find_interposer_library(library, error)) return fail(error);
  // Last of the checks: it may take NVML a while to start.
  const auto& device_mem = invocation.flag_text[kDeviceMemRow];
  if (device_mem &&
      !cli::check_device_indices(*device_mem, variable("CUDA_VISIBLE_DEVICES"), error)) {
    return fail(error);
  }
  if (limits.tenant.empty() && !cli::new_tenant_id(limits.tenant, error)) return fail(error);
  // After every check: it may start a server, for a job that must then run.
  if (invocation.no_server) {
    limits.socket.clear();
  } else if (!choose_job_server(limits, asked, error)) {
    return fail(error);
  }

  std::vector<std::string> environment;
  if (!cli::job_environment(environ, limits, library, environment, error)) return fail(error);
  cli::sweep_stale_ledgers(limits.ledger_dir);
  const int status = cli::run_command(invocation.command, environment, error);
  std::fprintf(stderr, "gpulimit: %s\n", error.c_str());
  return status;
}
