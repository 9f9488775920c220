#include "cli_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace integration {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings)
    pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

bool CliRun::exited_with(int code) const {
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == code;
}

bool CliRun::killed_by(int signal) const {
  return WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == signal;
}

std::string CliRun::describe() const {
  std::ostringstream text;
  if (WIFEXITED(wait_status))
    text << "exit status " << WEXITSTATUS(wait_status);
  else if (WIFSIGNALED(wait_status))
    text << "killed by signal " << WTERMSIG(wait_status);
  else
    text << "wait status " << wait_status;
  text << "\nstdout:\n" << out << "stderr:\n" << err;
  return text.str();
}

CliRun run_program(const std::string& program, const std::vector<std::string>& args,
                   const std::vector<std::string>& environment, const std::string& output_dir,
                   const std::string& working_dir) {
  // Each run gets its own files, so that one test may run several programs.
  static int runs = 0;
  const std::string prefix = output_dir + "/run" + std::to_string(++runs);
  const std::string out_path = prefix + ".out";
  const std::string err_path = prefix + ".err";

  std::vector<std::string> argv_text = {program};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<std::string> envp_text = environment;
  const std::vector<char*> argv = pointers_to(argv_text);
  const std::vector<char*> envp = pointers_to(envp_text);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!working_dir.empty()) posix_spawn_file_actions_addchdir_np(&actions, working_dir.c_str());

  CliRun run;
  const int error =
      posix_spawn(&run.pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    ADD_FAILURE() << "cannot start " << program << ": " << std::strerror(error);
    return run;
  }
  while (waitpid(run.pid, &run.wait_status, 0) < 0) {
    if (errno != EINTR) {
      ADD_FAILURE() << "waitpid: " << std::strerror(errno);
      break;
    }
  }
  run.out = read_file(out_path);
  run.err = read_file(err_path);
  return run;
}

Variables parse_environment(const std::string& text) {
  Variables variables;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    const size_t equals = line.find('=');
    if (equals != std::string::npos)
      variables.emplace(line.substr(0, equals), line.substr(equals + 1));
    start = end + 1;
  }
  return variables;
}

}  // namespace integration
