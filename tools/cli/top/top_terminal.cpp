#include "top/top_terminal.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "top/top_screen.h"

namespace gpulimit::cli {
namespace {

// What the handlers need, set before they are installed. One terminal per
// process, so static.
struct Terminal {
  int in_fd = -1;
  int out_fd = -1;
  termios saved{};
  termios keys{};
};
Terminal g_terminal;
volatile sig_atomic_t g_taken = 0;   // the terminal is in top's state
volatile sig_atomic_t g_redraw = 0;  // resized, or back from a stop
// A pipe the handlers write a byte to, so that a wait on it ends even when
// the signal came just before the wait began.
int g_wake[2] = {-1, -1};

constexpr int kEndingSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
struct sigaction g_previous_ending[std::size(kEndingSignals)];
struct sigaction g_previous_stop;
struct sigaction g_previous_resize;

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    data += written;
    size -= static_cast<std::size_t>(written);
  }
  return true;
}

void wake() {
  const char byte = 0;
  if (g_wake[1] < 0) return;
  // Full pipe: a wake-up is pending anyway.
  [[maybe_unused]] const ssize_t written = ::write(g_wake[1], &byte, 1);
}

void take_terminal() {
  tcsetattr(g_terminal.in_fd, TCSADRAIN, &g_terminal.keys);
  write_all(g_terminal.out_fd, kEnterScreen.data(), kEnterScreen.size());
  g_taken = 1;
}

void give_back_terminal() {
  if (!g_taken) return;
  g_taken = 0;
  write_all(g_terminal.out_fd, kLeaveScreen.data(), kLeaveScreen.size());
  tcsetattr(g_terminal.in_fd, TCSADRAIN, &g_terminal.saved);
}

extern "C" void on_ending_signal(int signal_number) {
  give_back_terminal();
  // The default action once this handler returns and unblocks it: the
  // process ends by the signal, as it would without top's handler.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal_number, &default_action, nullptr);
  raise(signal_number);
}

extern "C" void on_stop_signal(int) {
  const int saved_errno = errno;
  const bool was_taken = g_taken;
  give_back_terminal();
  raise(SIGSTOP);  // the stop Ctrl-Z asked for; returns on SIGCONT
  if (was_taken) {
    take_terminal();
    g_redraw = 1;
    wake();
  }
  errno = saved_errno;
}

extern "C" void on_resize(int) {
  const int saved_errno = errno;
  g_redraw = 1;
  wake();
  errno = saved_errno;
}

void install(int signal_number, void (*handler)(int), struct sigaction* previous) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  // No SA_RESTART: a wait in poll() ends, so the view redraws at once.
  action.sa_flags = 0;
  sigaction(signal_number, &action, previous);
}

}  // namespace

bool TerminalSession::enter(int in_fd, int out_fd, std::string& error) {
  if (entered_) return true;
  termios saved{};
  if (!isatty(out_fd) || !isatty(in_fd) || tcgetattr(in_fd, &saved) != 0) {
    error = "the view needs a terminal on stdin and stdout; --batch prints plain text instead";
    return false;
  }
  if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    error = std::string("cannot make a pipe: ") + std::strerror(errno);
    return false;
  }
  g_terminal.in_fd = in_fd;
  g_terminal.out_fd = out_fd;
  g_terminal.saved = saved;
  g_terminal.keys = saved;
  // Keys one at a time, not echoed; Ctrl-C and Ctrl-Z still signal.
  g_terminal.keys.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
  g_terminal.keys.c_cc[VMIN] = 1;
  g_terminal.keys.c_cc[VTIME] = 0;
  for (std::size_t i = 0; i < std::size(kEndingSignals); ++i)
    install(kEndingSignals[i], on_ending_signal, &g_previous_ending[i]);
  install(SIGTSTP, on_stop_signal, &g_previous_stop);
  install(SIGWINCH, on_resize, &g_previous_resize);
  take_terminal();
  entered_ = true;
  return true;
}

void TerminalSession::leave() {
  if (!entered_) return;
  entered_ = false;
  give_back_terminal();
  for (std::size_t i = 0; i < std::size(kEndingSignals); ++i)
    sigaction(kEndingSignals[i], &g_previous_ending[i], nullptr);
  sigaction(SIGTSTP, &g_previous_stop, nullptr);
  sigaction(SIGWINCH, &g_previous_resize, nullptr);
  for (int& fd : g_wake) {
    ::close(fd);
    fd = -1;
  }
}

int TerminalSession::wake_fd() const {
  return g_wake[0];
}

bool TerminalSession::write(std::string_view bytes) const {
  return write_all(g_terminal.out_fd, bytes.data(), bytes.size());
}

bool TerminalSession::take_redraw() {
  char bytes[64];
  while (::read(g_wake[0], bytes, sizeof bytes) > 0) {
  }
  const bool redraw = g_redraw;
  g_redraw = 0;
  return redraw;
}

void TerminalSession::size(std::size_t& width, std::size_t& height) const {
  winsize window{};
  width = 80;
  height = 24;
  if (ioctl(g_terminal.out_fd, TIOCGWINSZ, &window) != 0) return;
  if (window.ws_col > 0) width = window.ws_col;
  if (window.ws_row > 0) height = window.ws_row;
}

}  // namespace gpulimit::cli
