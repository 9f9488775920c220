// A process a test starts, and the one way tests start, talk to, end and
// reap them: a program run with the argv, environment, working directory
// and standard streams the test chooses (files, pipes, /dev/null, or a
// pseudo-terminal of its own), or a fork of the test running a function.
// Every process-driving helper of the tests is a thin layer on this.
#pragma once

#include <sys/types.h>
#include <termios.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpulimit::testing {

// Variables to set on top of an environment, in order; a later one of a
// name replaces an earlier one.
using Variables = std::vector<std::pair<std::string, std::string>>;

// `base` with `name` set to `value`, replacing an earlier setting.
Variables with(Variables base, const std::string& name, const std::string& value);

// This process's environment (NAME=value each) with `overrides` replacing or
// adding variables, and without the variables whose NAME=value starts with
// one of `dropped_prefixes`.
std::vector<std::string> this_environment(const Variables& overrides = {},
                                          const std::vector<std::string>& dropped_prefixes = {});

// Where a child's standard stream goes.
struct Stream {
  enum class Kind {
    kNull,     // /dev/null
    kInherit,  // the test's own
    kPipe,     // a pipe whose other end the Process holds
    kFile,     // `path`, truncated (or appended to)
    kStdout,   // stderr only: wherever stdout goes
  };
  Kind kind = Kind::kNull;
  std::string path;
  bool append = false;

  static Stream null() { return {}; }
  static Stream inherit() { return {Kind::kInherit, {}, false}; }
  static Stream pipe() { return {Kind::kPipe, {}, false}; }
  static Stream file(std::string path, bool append = false) {
    return {Kind::kFile, std::move(path), append};
  }
  static Stream as_stdout() { return {Kind::kStdout, {}, false}; }
};

// A pseudo-terminal of the process's own, its controlling terminal and its
// stdin, stdout and stderr; the Process holds the terminal's master side.
struct Terminal {
  unsigned short columns = 80;
  unsigned short rows = 24;
};

// What to start.
struct Launch {
  std::vector<std::string> argv;  // argv[0]: the program's path
  // The child's whole environment (NAME=value each); this process's own
  // when unset.
  std::optional<std::vector<std::string>> environment;
  std::string working_directory;  // the test's own when empty
  Stream in = Stream::null();     // kNull, kInherit or kPipe
  Stream out = Stream::null();
  Stream err = Stream::inherit();
  std::optional<Terminal> terminal;  // replaces in, out and err
  // SIGKILL the child when the thread that started it ends, so that no
  // helper outlives a crashed test.
  bool dies_with_test = false;
};

// How a process ended, as waitpid reports it.
struct ExitStatus {
  int wait_status = 0;

  bool exited() const;
  int code() const;  // the exit code, if exited()
  bool signaled() const;
  int signal() const;  // the signal that ended it, if signaled()
  // As a shell reports it: the exit code, or 128 + the signal.
  int shell() const;
};

class Process {
 public:
  // Not started.
  Process() = default;
  // Starts `launch`; a test failure, and not started(), when it cannot run
  // (the program missing, a file not opened).
  explicit Process(const Launch& launch);
  // A fork of the test running `body(from_test, to_test)`: two pipe ends,
  // the other ends of which are this Process's stdin and stdout. The child
  // holds no other descriptor of the test's (so that the test's own
  // connections close when the test closes them), dies with the test, and
  // _exit()s with what `body` returns.
  static Process fork(const std::function<int(int from_test, int to_test)>& body);

  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  // SIGKILLs the process if it still runs and reaps it; closes its pipes.
  ~Process();

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // True once it has been reaped (its status is then known).
  bool reaped() const { return status_.has_value(); }
  const std::optional<ExitStatus>& exit_status() const { return status_; }

  // The test's ends of the child's pipes (or of its terminal); -1 where none.
  int stdin_fd() const { return to_child_; }
  int stdout_fd() const { return from_child_; }
  int stderr_fd() const { return errors_from_child_; }
  // The test's own handle on the process's terminal (its side, kept open so
  // that the terminal outlives the program), and the terminal's settings
  // from before the program started; -1 and {} without a terminal.
  int terminal_fd() const { return terminal_; }
  const termios& terminal_settings_at_start() const { return terminal_at_start_; }

  // Writes `line` and a newline to its stdin; false when not all of it
  // could be written (the process has gone).
  bool say(std::string_view line);
  // Closes its stdin: the process reads end of input.
  void close_stdin();
  // The next line of its stdout, without the newline; nothing at end of
  // output or after `timeout`.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // The next line of its stdout that starts with `prefix` (lines before it
  // are dropped); "" at end of output or after `timeout`.
  std::string expect(std::string_view prefix, std::chrono::milliseconds timeout);
  // Everything left on its stdout or stderr pipe, up to the end (when every
  // writer has closed it).
  std::string read_stdout_to_end();
  std::string read_stderr_to_end();

  void signal(int signal);
  // Waits until it has ended, reaping it; nothing after `timeout` (it is
  // then left running). Its status again when already reaped.
  std::optional<ExitStatus> wait_for_exit(std::chrono::milliseconds timeout);
  // Waits as long as it runs (ctest's timeout is the bound); its status.
  ExitStatus wait();
  // SIGKILL, and waits until the kernel has reaped it (its locks and
  // descriptors are gone); its status.
  ExitStatus kill_now();
  // Waits until it has stopped (SIGSTOP); false if it ended, or the time ran
  // out, first.
  bool wait_until_stopped(std::chrono::milliseconds timeout);

 private:
  void close_all();
  void reap_blocking();

  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
  int to_child_ = -1;
  int from_child_ = -1;
  int errors_from_child_ = -1;
  int terminal_ = -1;
  termios terminal_at_start_{};
  std::string buffered_;  // read from stdout past the last line returned
};

}  // namespace gpulimit::testing
