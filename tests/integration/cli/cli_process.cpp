#include "cli_process.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "gpulimit/testing/process.h"

namespace integration {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
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

  gpulimit::testing::Launch launch;
  launch.argv = {program};
  launch.argv.insert(launch.argv.end(), args.begin(), args.end());
  launch.environment = environment;
  launch.working_directory = working_dir;
  launch.out = gpulimit::testing::Stream::file(out_path);
  launch.err = gpulimit::testing::Stream::file(err_path);

  CliRun run;
  gpulimit::testing::Process process(launch);
  if (!process.started()) return run;
  run.pid = process.pid();
  run.wait_status = process.wait().wait_status;
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
