// The environment of a job of tenant `tenant` run by the gpulimit built here
// against the gpulimitd at `socket` on `machine`, its ledgers in
// `ledger_dir`: what the tests that start a real server give their jobs.
#pragma once

#include <string>

#include "simulated_machine.h"
#include "workload_process.h"

namespace integration {

inline Environment job_under_server(const SimulatedMachine& machine, const std::string& socket,
                                    const std::string& ledger_dir, const std::string& tenant) {
  Environment env = machine.environment();
  env = with(env, "GPULIMIT_SOCKET", socket);
  env = with(env, "GPULIMIT_LEDGER_DIR", ledger_dir);
  env = with(env, "GPULIMIT_LIBRARY", kLibrary);
  env = with(env, "GPULIMIT_TENANT", tenant);
  env = with(env, "ASAN_OPTIONS", "verify_asan_link_order=0");
  return env;
}

}  // namespace integration
