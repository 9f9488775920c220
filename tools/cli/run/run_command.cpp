#include "run/run_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/exec_arguments.h"

namespace gpulimit::cli {

int run_command(const std::vector<std::string>& command,
                const std::vector<std::string>& environment, std::string& error) {
  const std::vector<char*> argv = pointers_to(command);
  const std::vector<char*> envp = pointers_to(environment);
  execvpe(argv[0], argv.data(), envp.data());

  const int failure = errno;
  const std::string& name = command.front();
  // As a shell says it: a bare name that PATH does not hold is "not found".
  if ((failure == ENOENT || failure == ENOTDIR) && name.find('/') == std::string::npos) {
    error = name + ": command not found";
    return kExitNotFound;
  }
  error = name + ": " + std::strerror(failure);
  return failure == ENOENT || failure == ENOTDIR ? kExitNotFound : kExitCannotExecute;
}

}  // namespace gpulimit::cli
