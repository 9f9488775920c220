// gpulimit: runs a command as a new tenant under GPU limits. Everything is
// checked before anything runs; then gpulimit becomes the command.
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
#include "run_command.h"
#include "stale_ledgers.h"
#include "tenant_id.h"

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

}  // namespace

int main(int argc, char** argv) {
  namespace cli = gpulimit::cli;
  namespace options = gpulimit::options;

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

  // The limits exactly as every process of the job will read them.
  options::Limits limits;
  if (!options::limits_from_command_line(environ, invocation.flag_values(), limits, error)) {
    return fail(error);
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

  std::vector<std::string> environment;
  if (!cli::job_environment(environ, limits, library, environment, error)) return fail(error);
  cli::sweep_stale_ledgers(limits.ledger_dir);
  const int status = cli::run_command(invocation.command, environment, error);
  std::fprintf(stderr, "gpulimit: %s\n", error.c_str());
  return status;
}
