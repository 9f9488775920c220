// The terminal while `gpulimit top` shows its view: keys read one by one
// without echo, the alternate screen, and everything put back as it was on
// every way out: quitting, an error (the destructor), SIGINT, SIGTERM,
// SIGHUP or SIGQUIT (put back, then the signal's default action, so the
// caller sees how top ended), and Ctrl-Z (put back while stopped, taken
// again on SIGCONT). SIGWINCH marks the view for redrawing at the new size.
//
// The signal handlers use only async-signal-safe calls (tcsetattr, write,
// sigaction, raise), on state set up before they are installed.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpulimit::cli {

class TerminalSession {
 public:
  TerminalSession() = default;
  TerminalSession(const TerminalSession&) = delete;
  TerminalSession& operator=(const TerminalSession&) = delete;
  ~TerminalSession() { leave(); }

  // Takes the terminal on `in_fd` (keys) and `out_fd` (the view). False
  // with `error` set to one line when they are not a terminal; nothing is
  // changed then. One session at a time.
  bool enter(int in_fd, int out_fd, std::string& error);
  // Puts the terminal back; idempotent.
  void leave();

  // Writes all of `bytes` to the terminal; false when it is gone.
  bool write(std::string_view bytes) const;
  // Whether the size changed (or the view was lost to a stop) since the
  // last call.
  bool take_redraw();
  // Readable when take_redraw() has news: wait on it beside the keys.
  int wake_fd() const;
  // The terminal's size; 80 x 24 where it does not say.
  void size(std::size_t& width, std::size_t& height) const;

 private:
  bool entered_ = false;
};

}  // namespace gpulimit::cli
