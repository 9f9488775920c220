// What the simulated devices really hold, as a process without
// libgpulimit.so sees it through NVML: device_views run with LD_PRELOAD and
// every GPULIMIT_* variable removed from its environment, on the same
// simulated machine (FAKECUDA_STATE). The preloaded test process cannot ask
// its own NVML: gpulimit narrows what it reports to the tenant's cap.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

extern char** environ;

namespace intercept_test {

// Bytes in use on NVML device `index`, or UINT64_MAX when device_views failed.
inline uint64_t device_used(unsigned index) {
  std::vector<std::string> kept;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    if (entry.rfind("LD_PRELOAD=", 0) == 0 || entry.rfind("GPULIMIT_", 0) == 0) continue;
    kept.push_back(entry);
  }
  std::vector<char*> env;
  for (std::string& entry : kept)
    env.push_back(entry.data());
  env.push_back(nullptr);
  int out[2];
  if (pipe(out) != 0) return UINT64_MAX;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  char program[] = DEVICE_VIEWS_PATH;
  char* argv[] = {program, nullptr};
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, program, &actions, nullptr, argv, env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  std::string text;
  char buffer[4096];
  ssize_t n = 0;
  while (spawned == 0 && (n = read(out[0], buffer, sizeof buffer)) > 0)
    text.append(buffer, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  if (spawned != 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    return UINT64_MAX;
  const std::string key = " nvml" + std::to_string(index) + "_used=";
  const size_t at = text.find(key);
  if (at == std::string::npos) return UINT64_MAX;
  return std::stoull(text.substr(at + key.size()));
}

}  // namespace intercept_test
