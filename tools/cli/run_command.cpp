#include "run_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpulimit::cli {

std::vector<char*> pointers_to(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& text : strings)
    pointers.push_back(const_cast<char*>(text.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

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
