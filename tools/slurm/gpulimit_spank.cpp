// gpulimit_spank.so: runs every task of a Slurm job step under gpulimit, as
// `gpulimit --mem ... -- CMD` would run it, with the step as one tenant of
// the node's system gpulimitd.
//
//   srun, sbatch, salloc  slurm_spank_init registers --gpu-mem, --gpu-sm,
//                         --gpu-weight, --gpu-priority; their callbacks check
//                         each value, so a bad one stops the submission.
//   slurmstepd            slurm_spank_user_init notes the step;
//                         slurm_spank_task_init, in each task just before
//                         exec, writes LD_PRELOAD and the GPULIMIT_*
//                         variables into the task's environment;
//                         slurm_spank_exit removes the step's ledger file
//                         once no process holds it, killed tasks included.
//
// Slurm calls in through C: nothing may throw out of a callback.
// spank.h declares the slurm_spank_* entry points outside its extern "C".
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/server_choice.h"
#include "gpulimit/options/option_table.h"
#include "gpulimit/shm/tenant_ledger.h"
#include "plugin_settings.h"
#include "run/job_environment.h"
#include "step_limits.h"
#include "step_options.h"
#include "step_tenant.h"

extern "C" {
// Declared extern first: a const definition alone has internal linkage in
// C++, and Slurm's loader looks these up by name.
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(gpulimit, 1)
}

namespace {

namespace slurm = gpulimit::slurm;
namespace options = gpulimit::options;

static_assert(slurm::kBatchStep == SLURM_BATCH_SCRIPT);
static_assert(slurm::kExternStep == SLURM_EXTERN_CONT);
static_assert(slurm::kInteractiveStep == SLURM_INTERACTIVE_STEP);

constexpr const char* kPrefix = "gpulimit";
constexpr int kEnvironmentValueMax = 4096;

// Each Slurm process (srun, sbatch, salloc, slurmstepd, a task) loads the
// plugin afresh: these live for one of them.
slurm::PluginSettings settings;
bool settings_read = false;

// The step this slurmstepd runs, noted by user_init for exit.
struct StepRecord {
  uint32_t job_id = 0;
  uint32_t step_id = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};
std::optional<StepRecord> step_record;

int check_option(int row, const char* text, int /*remote*/) {
  try {
    if (!settings_read) return 0;  // init failed, and said so
    std::string error;
    if (row < 0 || static_cast<std::size_t>(row) >= slurm::kStepOptionCount) return -1;
    if (slurm::check_step_option(static_cast<std::size_t>(row), text ? text : "", settings,
                                 error)) {
      return 0;
    }
    slurm_error("%s: %s", kPrefix, error.c_str());
  } catch (...) {
    slurm_error("%s: out of memory", kPrefix);
  }
  return -1;
}

// spank_option wants writable strings; these are never written.
char* text(std::string_view literal) {
  return const_cast<char*>(literal.data());
}

std::array<spank_option, slurm::kStepOptionCount> make_spank_options() {
  std::array<spank_option, slurm::kStepOptionCount> result{};
  for (std::size_t row = 0; row < slurm::kStepOptionCount; ++row) {
    const slurm::StepOption& step_option = slurm::kStepOptions[row];
    spank_option& entry = result[row];
    // Literals all three, so data() ends in NUL.
    entry.name = text(step_option.name);
    entry.arginfo = text(options::option(step_option.id).metavar);
    entry.usage = text(step_option.usage);
    entry.has_arg = 1;
    entry.val = static_cast<int>(row);  // check_option's row
    entry.cb = check_option;
  }
  return result;
}

std::array<spank_option, slurm::kStepOptionCount> spank_options_table = make_spank_options();

bool option_given(spank_t spank, std::size_t row, std::string& value) {
  char* given = nullptr;
  if (spank_option_getopt(spank, &spank_options_table[row], &given) != ESPANK_SUCCESS) return false;
  value = given ? given : "";
  return true;
}

std::optional<std::string> job_variable(spank_t spank, const char* name) {
  std::vector<char> buffer(kEnvironmentValueMax);
  if (spank_getenv(spank, name, buffer.data(), static_cast<int>(buffer.size())) != ESPANK_SUCCESS)
    return std::nullopt;
  return std::string(buffer.data());
}

bool is_written_variable(std::string_view name) {
  return name == "LD_PRELOAD" || options::is_option_variable(name);
}

// Whether the step asked for GPU time, which only gpulimitd can share out.
bool compute_asked(const slurm::StepRequest& request, const options::Limits& limits) {
  for (std::size_t row = 0; row < slurm::kStepOptionCount; ++row) {
    if (request[row] && slurm::kStepOptions[row].id != options::OptionId::kMem) return true;
  }
  return limits.compute != options::ComputeLimits{};
}

// The task's limits written into its environment, exactly as the gpulimit
// CLI writes a job's (cli::job_environment). -1 with one line logged when
// the task must not start.
int limit_task(spank_t spank) {
  slurm::StepRequest request;
  for (std::size_t row = 0; row < slurm::kStepOptionCount; ++row) {
    std::string value;
    if (option_given(spank, row, value)) request[row] = value;
  }
  std::optional<unsigned> shards;
  if (const std::optional<std::string> count = job_variable(spank, "SLURM_SHARDS_ON_NODE"))
    shards = slurm::parse_shard_count(*count);
  const std::optional<unsigned> share = slurm::shard_percent(shards, settings.shards_per_gpu);
  if (!slurm::step_is_limited(settings, request, share)) return 0;

  options::Limits limits;
  std::string error;
  if (!slurm::step_limits(settings, request, share, limits, error)) {
    slurm_error("%s: %s", kPrefix, error.c_str());
    return -1;
  }
  // The loader skips an LD_PRELOAD entry it cannot open with a warning, and
  // the task would run without its limits. As the task's user, as the
  // loader will open it.
  if (access(settings.library.c_str(), R_OK) != 0) {
    slurm_error("%s: library=%s: %s", kPrefix, settings.library.c_str(), std::strerror(errno));
    return -1;
  }
  uint32_t job_id = 0;
  uint32_t step_id = 0;
  if (spank_get_item(spank, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(spank, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
    slurm_error("%s: cannot tell the job step from Slurm", kPrefix);
    return -1;
  }
  limits.tenant = slurm::step_tenant_id(job_id, step_id);

  std::string reason;
  if (!gpulimit::cli::accepts_connections(limits.socket, reason)) {
    if (compute_asked(request, limits)) {
      slurm_error("%s: a share of GPU time needs gpulimitd: nobody listens at %s (%s)", kPrefix,
                  limits.socket.c_str(), reason.c_str());
      return -1;
    }
    slurm_spank_log("%s: time-slicing is off, memory caps only: nobody listens at %s (%s)", kPrefix,
                    limits.socket.c_str(), reason.c_str());
    limits.socket.clear();
  }

  char** job_env = nullptr;
  if (spank_get_item(spank, S_JOB_ENV, &job_env) != ESPANK_SUCCESS) job_env = nullptr;
  std::vector<std::string> environment;
  // No leader: a step's tasks end with the step, which Slurm ends, and a
  // leader in the submitting job's environment names a process of another
  // job (or machine).
  if (!gpulimit::cli::job_environment(job_env, limits, gpulimit::protocol::JobLeader{},
                                      settings.library, environment, error)) {
    slurm_error("%s: %s", kPrefix, error.c_str());
    return -1;
  }
  // job_environment drops every earlier gpulimit variable: so must the task.
  for (const options::OptionSpec& spec : options::kOptionTable)
    spank_unsetenv(spank, std::string(spec.variable).c_str());
  spank_unsetenv(spank, gpulimit::protocol::kJobLeaderVariable);
  for (const std::string& assignment : environment) {
    const std::size_t equals = assignment.find('=');
    const std::string name = assignment.substr(0, equals);
    if (!is_written_variable(name)) continue;
    const std::string value = assignment.substr(equals + 1);
    if (spank_setenv(spank, name.c_str(), value.c_str(), 1) != ESPANK_SUCCESS) {
      slurm_error("%s: cannot set %s in the task's environment", kPrefix, name.c_str());
      return -1;
    }
  }
  return 0;
}

// Removes the ledger at `path` if no process holds it. The ledger removes
// only a file of the caller's own uid, and slurmstepd runs this as root:
// a child process becomes the job's user to do it, as gpulimitd's recounts
// do, so that root never acts on a file in a directory users write to.
void remove_ledger_as(const StepRecord& step, const std::string& path) {
  const pid_t child = fork();
  if (child < 0) return;
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 && getuid() == 0) _exit(1);
    if (setgid(step.gid) != 0 || setuid(step.uid) != 0) _exit(1);
    _exit(gpulimit::shm::TenantLedger::remove_if_stale(path) ? 0 : 1);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t spank, int argc, char** argv) {
  try {
    const spank_context_t context = spank_context();
    if (context != S_CTX_LOCAL && context != S_CTX_REMOTE && context != S_CTX_ALLOCATOR) return 0;
    std::string error;
    if (!slurm::parse_plugin_arguments(argc, argv, settings, error)) {
      slurm_error("%s: plugstack.conf: %s", kPrefix, error.c_str());
      return -1;
    }
    settings_read = true;
    for (spank_option& option : spank_options_table) {
      if (spank_option_register(spank, &option) != ESPANK_SUCCESS) {
        slurm_error("%s: cannot register --%s", kPrefix, option.name);
        return -1;
      }
    }
    return 0;
  } catch (...) {
    slurm_error("%s: out of memory", kPrefix);
    return -1;
  }
}

int slurm_spank_user_init(spank_t spank, int /*argc*/, char** /*argv*/) {
  StepRecord record;
  if (spank_get_item(spank, S_JOB_ID, &record.job_id) == ESPANK_SUCCESS &&
      spank_get_item(spank, S_JOB_STEPID, &record.step_id) == ESPANK_SUCCESS &&
      spank_get_item(spank, S_JOB_UID, &record.uid) == ESPANK_SUCCESS &&
      spank_get_item(spank, S_JOB_GID, &record.gid) == ESPANK_SUCCESS) {
    step_record = record;
  }
  return 0;
}

int slurm_spank_task_init(spank_t spank, int /*argc*/, char** /*argv*/) {
  try {
    if (!settings_read) return -1;
    return limit_task(spank);
  } catch (...) {
    slurm_error("%s: out of memory", kPrefix);
    return -1;
  }
}

// After every task of the step has exited, killed ones included. gpulimitd
// has already dropped the tenant and recounted its memory as each process
// exited; what is left is the ledger file, which no task can remove once
// it has been killed.
int slurm_spank_exit(spank_t /*spank*/, int /*argc*/, char** /*argv*/) {
  try {
    if (spank_context() != S_CTX_REMOTE || !settings_read || !step_record) return 0;
    const std::string tenant = slurm::step_tenant_id(step_record->job_id, step_record->step_id);
    remove_ledger_as(*step_record, gpulimit::shm::TenantLedger::path_for(settings.ledger_dir,
                                                                         step_record->uid, tenant));
  } catch (...) {
    // Best effort: the next gpulimit of the same user sweeps stale ledgers.
  }
  return 0;
}

}  // extern "C"
