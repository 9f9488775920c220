// A program run in a pseudo-terminal of its own, as a person runs it in a
// terminal (or over ssh): the test plays the terminal, reading what the
// program writes, typing keys, resizing the window, and checking the
// terminal's settings once the program is gone.
#pragma once

#include <sys/types.h>
#include <termios.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/testing/process.h"

namespace integration {

class TerminalProcess {
 public:
  // Starts `program` with `args` and exactly `environment` (NAME=value) on
  // a new terminal of `columns` x `rows`, its controlling terminal.
  TerminalProcess(const std::string& program, const std::vector<std::string>& args,
                  const std::vector<std::string>& environment, unsigned short columns,
                  unsigned short rows);
  TerminalProcess(const TerminalProcess&) = delete;
  TerminalProcess& operator=(const TerminalProcess&) = delete;
  // Kills the program if it still runs.
  ~TerminalProcess();

  bool started() const { return process_.started(); }
  pid_t pid() const { return process_.pid(); }

  // Everything the program has written so far.
  const std::string& output() const { return output_; }
  // Reads until the output from `from` on contains `text`; false if the
  // time runs out first.
  bool wait_for_output(std::string_view text, std::chrono::milliseconds timeout,
                       std::size_t from = 0);
  // Types `keys` (bytes, as a keyboard sends them).
  bool type(std::string_view keys);
  // Gives the terminal a new size: the kernel sends SIGWINCH to the program.
  bool resize(unsigned short columns, unsigned short rows);
  // Waits for the program to end, reading what it writes; the wait status
  // as waitpid gives it, or -1 if it was killed when the time ran out.
  int wait(std::chrono::milliseconds timeout);
  // The terminal's settings as they are now (the program may be gone).
  termios settings() const;
  // The settings the terminal started with.
  const termios& initial_settings() const { return process_.terminal_settings_at_start(); }

 private:
  // Appends what is there to read within `timeout`; false when nothing came.
  bool read_some(std::chrono::milliseconds timeout);

  gpulimit::testing::Process process_;
  int master_ = -1;  // process_'s
  std::string output_;
};

// What each row of a screen receives, taken from the bytes a program wrote:
// a cursor position (ESC [ row ; col H) starts a new piece, other escape
// sequences are left out, and the text between is kept, so a test can see
// how wide each piece written to a row is.
std::vector<std::string> written_pieces(std::string_view bytes);

}  // namespace integration
