#include "run/run_job.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "build_config.h"
#include "common/help_text.h"
#include "common/interposer_library.h"
#include "common/server_choice.h"
#include "gpulimit/options/environment.h"
#include "run/command_line.h"
#include "run/cuda_devices.h"
#include "run/device_check.h"
#include "run/job_environment.h"
#include "run/run_command.h"
#include "run/stale_ledgers.h"
#include "run/tenant_id.h"

namespace gpulimit::cli {
namespace {

constexpr int kExitUsage = 2;
constexpr std::size_t kDeviceMemRow = static_cast<std::size_t>(options::OptionId::kDeviceMem);

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
bool choose_job_server(options::Limits& limits, const std::string& asked, char** envp,
                       std::string& error) {
  std::string socket;
  if (choose_server(server_places(envp, limits.socket, getuid()), StartServer::kOnDemand, envp,
                    socket, error)) {
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

int run_job(int argc, char** argv, char** envp) {
  Invocation invocation;
  std::string error;
  if (!parse_command_line(argc, argv, invocation, error)) return fail(error);
  if (invocation.help) {
    std::fputs(help_text().c_str(), stdout);
    return EXIT_SUCCESS;
  }
  if (invocation.version) {
    std::printf("gpulimit %s\n", GPULIMIT_VERSION);
    return EXIT_SUCCESS;
  }

  // The limits exactly as every process of the job will read them.
  const options::FlagValues flags = invocation.flag_values();
  options::Limits limits;
  if (!options::limits_from_command_line(envp, flags, limits, error)) return fail(error);
  std::string asked;
  if (!options::compute_limits_asked(envp, flags, asked)) asked.clear();
  if (invocation.no_server && !asked.empty()) {
    return fail(asked + ": a limit of GPU time needs gpulimitd, and --no-server runs without it");
  }
  std::string library;
  if (!find_interposer_library(library, error)) return fail(error);
  // Last of the checks: it may take NVML a while to start.
  const auto& device_mem = invocation.flag_text[kDeviceMemRow];
  if (device_mem && !check_device_indices(*device_mem, variable("CUDA_VISIBLE_DEVICES"), error)) {
    return fail(error);
  }
  if (!bind_device_caps(limits.memory, error)) return fail(error);
  if (limits.tenant.empty() && !new_tenant_id(limits.tenant, error)) return fail(error);
  // After every check: it may start a server, for a job that must then run.
  if (invocation.no_server) {
    limits.socket.clear();
  } else if (!choose_job_server(limits, asked, envp, error)) {
    return fail(error);
  }

  // The command runs as this process (exec): its leader, whose exit ends
  // the job (an orphan is what outlives it).
  protocol::JobLeader leader;
  if (!protocol::read_job_leader(getpid(), leader)) leader = {};
  std::vector<std::string> environment;
  if (!job_environment(envp, limits, leader, library, environment, error)) return fail(error);
  sweep_stale_ledgers(limits.ledger_dir);
  const int status = run_command(invocation.command, environment, error);
  std::fprintf(stderr, "gpulimit: %s\n", error.c_str());
  return status;
}

}  // namespace gpulimit::cli
