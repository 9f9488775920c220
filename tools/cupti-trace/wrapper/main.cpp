// gpulimit-cupti-trace -o FILE -- COMMAND...: runs COMMAND with the CUPTI
// tracer preloaded and its trace going to FILE. Checks everything it can
// before touching FILE, then execs COMMAND: the exit status is COMMAND's.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "command_line.h"

namespace {

namespace fs = std::filesystem;
using gpulimit::cupti_trace::WrapperOptions;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitCannotRun = 126;
constexpr int kExitNotFound = 127;
constexpr std::string_view kLibraryName = "libgpulimit-cupti-trace.so";

void fail(const std::string& message) {
  std::fprintf(stderr, "gpulimit-cupti-trace: %s\n", message.c_str());
}

bool regular_file(const fs::path& path) {
  std::error_code ignored;
  return fs::is_regular_file(path, ignored);
}

// $GPULIMIT_CUPTI_TRACE_LIBRARY, else the library beside this program (the
// build tree), else in ../lib (an installation). Absolute: the command may
// change directory before it loads anything else.
std::optional<std::string> find_library() {
  if (const char* given = std::getenv("GPULIMIT_CUPTI_TRACE_LIBRARY"); given && *given) {
    if (regular_file(given)) return fs::absolute(given).lexically_normal().string();
    fail(std::string("GPULIMIT_CUPTI_TRACE_LIBRARY=") + given + ": no such file");
    return std::nullopt;
  }
  std::error_code failure;
  const fs::path self = fs::read_symlink("/proc/self/exe", failure);
  if (failure) {
    fail("cannot find " + std::string(kLibraryName) + ": /proc/self/exe: " + failure.message() +
         "; set GPULIMIT_CUPTI_TRACE_LIBRARY to its path");
    return std::nullopt;
  }
  const fs::path beside = self.parent_path() / kLibraryName;
  const fs::path installed = (self.parent_path() / ".." / "lib" / kLibraryName).lexically_normal();
  for (const fs::path& candidate : {beside, installed})
    if (regular_file(candidate)) return candidate.string();
  fail("cannot find " + std::string(kLibraryName) + " (looked for " + beside.string() + " and " +
       installed.string() + "); set GPULIMIT_CUPTI_TRACE_LIBRARY to its path");
  return std::nullopt;
}

// COMMAND as execvp would find it, or the exit status of its absence.
std::optional<std::string> find_command(const std::string& name, int& status) {
  const auto runnable = [](const fs::path& path) {
    return regular_file(path) && access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (runnable(name)) return name;
    status = regular_file(name) ? kExitCannotRun : kExitNotFound;
    fail(name + (status == kExitCannotRun ? ": not executable" : ": no such file"));
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string_view directories = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (;;) {
    const std::size_t colon = directories.find(':');
    std::string_view directory = directories.substr(0, colon);
    if (directory.empty()) directory = ".";
    const fs::path candidate = fs::path(directory) / name;
    if (runnable(candidate)) return candidate.string();
    if (colon == std::string_view::npos) break;
    directories.remove_prefix(colon + 1);
  }
  status = kExitNotFound;
  fail(name + ": command not found");
  return std::nullopt;
}

// Creates or empties FILE (keeps it with --append) and gives a new file the
// format's header comment, which readers skip.
bool prepare_output(const WrapperOptions& options, const std::string& path) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (options.append ? O_APPEND : O_TRUNC);
  const int fd = open(path.c_str(), flags, 0666);
  if (fd < 0) {
    fail("cannot open " + options.output + ": " + std::strerror(errno));
    return false;
  }
  struct stat status {};
  bool ok = fstat(fd, &status) == 0;
  if (ok && status.st_size == 0) {
    static constexpr std::string_view kHeader = "# pid device stream start_ns end_ns name\n";
    ok = write(fd, kHeader.data(), kHeader.size()) == static_cast<ssize_t>(kHeader.size());
  }
  if (!ok) fail("cannot write " + options.output + ": " + std::strerror(errno));
  close(fd);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> arguments(argv + 1, argv + argc);
  const gpulimit::cupti_trace::WrapperParse parsed =
      gpulimit::cupti_trace::parse_wrapper_arguments(arguments);
  if (!parsed.options) {
    fail(parsed.error);
    std::fprintf(stderr, "%s\n", gpulimit::cupti_trace::kUsage.data());
    return kExitUsage;
  }
  const WrapperOptions& options = *parsed.options;
  if (options.help) {
    std::fputs(gpulimit::cupti_trace::help_text().data(), stdout);
    return 0;
  }

  const std::optional<std::string> library = find_library();
  if (!library) return kExitFailure;
  int not_runnable = kExitNotFound;
  const std::optional<std::string> program = find_command(options.command.front(), not_runnable);
  if (!program) return not_runnable;
  const std::string output = fs::absolute(options.output).lexically_normal().string();
  if (!prepare_output(options, output)) return kExitFailure;

  const char* preload = std::getenv("LD_PRELOAD");
  const std::string preload_value =
      gpulimit::cupti_trace::preload_with_tracer(preload ? preload : "", *library);
  if (setenv("LD_PRELOAD", preload_value.c_str(), 1) != 0 ||
      setenv("GPULIMIT_CUPTI_TRACE_FILE", output.c_str(), 1) != 0) {
    fail(std::string("cannot set the environment: ") + std::strerror(errno));
    return kExitFailure;
  }
  std::vector<char*> command_argv;
  for (const std::string& word : options.command)
    command_argv.push_back(const_cast<char*>(word.c_str()));
  command_argv.push_back(nullptr);
  execv(program->c_str(), command_argv.data());
  const int error = errno;
  fail(options.command.front() + ": " + std::strerror(error));
  return error == ENOENT ? kExitNotFound : kExitCannotRun;
}
