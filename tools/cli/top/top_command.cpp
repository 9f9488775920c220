#include "top/top_command.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <string>
#include <thread>

#include "common/help_text.h"
#include "common/server_choice.h"
#include "common/status_client.h"
#include "gpulimit/protocol/status_json.h"
#include "top/top_command_line.h"
#include "top/top_layout.h"
#include "top/top_screen.h"
#include "top/top_terminal.h"

namespace gpulimit::cli {
namespace {

using Clock = std::chrono::steady_clock;

// A server slower than this to answer is shown as not answering; the view
// must stay responsive to keys.
constexpr std::chrono::seconds kTopReplyTimeout{2};
// Without a terminal or COLUMNS to say otherwise, batch lines are not cut
// short (as top -b does).
constexpr std::size_t kBatchWidth = 512;

int fail(int status, const std::string& message) {
  std::fprintf(stderr, "gpulimit: %s\n", message.c_str());
  return status;
}

std::string clock_text() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

// Asks the server each time anew: one that went away may be back, or
// another may have started in its place.
class StatusSource {
 public:
  StatusSource(char* const* envp, ServerPlaces places) : envp_(envp), places_(std::move(places)) {}

  // Sets `input`'s snapshot, or its problem; true when there is a snapshot.
  bool fetch(TopFrameInput& input) const {
    std::string error;
    std::string socket;
    std::string reply;
    protocol::status::Report snapshot;
    if (!choose_server(places_, StartServer::kNo, envp_, socket, error)) {
      // `error` says where nobody listens.
    } else if (request_status(socket, reply, error, kTopReplyTimeout) &&
               protocol::status::parse_status_report(reply, snapshot, error)) {
      input.snapshot = std::move(snapshot);
      input.problem.clear();
      return true;
    }
    input.snapshot.reset();
    input.problem = error;
    return false;
  }

 private:
  char* const* envp_;
  ServerPlaces places_;
};

// COLUMNS as the caller set it, else the terminal's width, else wide.
std::size_t batch_width(char* const* envp) {
  for (char* const* entry = envp; entry && *entry; ++entry) {
    const std::string_view assignment(*entry);
    if (!assignment.starts_with("COLUMNS=")) continue;
    const std::string value(assignment.substr(8));
    char* end = nullptr;
    const unsigned long columns = std::strtoul(value.c_str(), &end, 10);
    if (!value.empty() && *end == '\0' && columns > 0 && columns <= 100000) return columns;
    break;  // the first counts, as with getenv
  }
  winsize window{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &window) == 0 && window.ws_col > 0)
    return window.ws_col;
  return kBatchWidth;
}

int run_batch(const TopOptions& options, const StatusSource& source, char* const* envp) {
  TopFrameInput input;
  input.interval_s = static_cast<double>(options.interval.count()) / 1000.0;
  const std::size_t width = batch_width(envp);
  bool answered = false;
  auto next = Clock::now();
  for (uint64_t shown = 0; options.iterations == 0 || shown < options.iterations; ++shown) {
    if (shown > 0) {
      std::this_thread::sleep_until(next);
      std::fputc('\n', stdout);
    }
    next = Clock::now() + options.interval;
    answered = source.fetch(input);
    input.clock = clock_text();
    const TopFrame frame = render_top_frame(input, width);
    for (const std::string& line : frame.lines) {
      std::fputs(line.c_str(), stdout);
      std::fputc('\n', stdout);
    }
    if (std::fflush(stdout) != 0) return kExitTopFailure;
  }
  return answered ? 0 : kExitTopFailure;
}

enum class KeysResult { kGoOn, kQuit, kGone };

// Reads the keys waiting on `fd`: sorting keys change `input`.
KeysResult read_keys(int fd, TopFrameInput& input, bool& redraw) {
  char keys[64];
  const ssize_t got = ::read(fd, keys, sizeof keys);
  if (got < 0) return errno == EINTR || errno == EAGAIN ? KeysResult::kGoOn : KeysResult::kGone;
  if (got == 0) return KeysResult::kGone;
  for (ssize_t i = 0; i < got; ++i) {
    if (keys[i] == 'q' || keys[i] == 'Q') return KeysResult::kQuit;
    if (const auto key = sort_key_for(keys[i])) {
      input.sort = *key;
      redraw = true;
    }
  }
  return KeysResult::kGoOn;
}

int run_view(const TopOptions& options, const StatusSource& source) {
  TerminalSession terminal;
  std::string error;
  if (!terminal.enter(STDIN_FILENO, STDOUT_FILENO, error))
    return fail(kExitTopUsage, "top: " + error);

  TopFrameInput input;
  input.interval_s = static_cast<double>(options.interval.count()) / 1000.0;
  auto next = Clock::now();
  uint64_t shown = 0;
  bool redraw = true;
  for (;;) {
    if (Clock::now() >= next) {
      source.fetch(input);
      input.clock = clock_text();
      next = Clock::now() + options.interval;
      ++shown;
      redraw = true;
    }
    if (terminal.take_redraw()) redraw = true;
    if (redraw) {
      std::size_t width = 0;
      std::size_t height = 0;
      terminal.size(width, height);
      if (!terminal.write(screen_update(render_top_frame(input, width), width, height)))
        return kExitTopFailure;  // the terminal is gone
      redraw = false;
    }
    if (options.iterations != 0 && shown >= options.iterations) return 0;

    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    pollfd ready[] = {{.fd = STDIN_FILENO, .events = POLLIN, .revents = 0},
                      {.fd = terminal.wake_fd(), .events = POLLIN, .revents = 0}};
    const int count = ::poll(ready, 2, static_cast<int>(std::max<int64_t>(0, wait.count())));
    if (count < 0 && errno != EINTR) return kExitTopFailure;
    const pollfd& keys = ready[0];
    if (count <= 0 || keys.revents == 0) continue;             // a refresh, a resize
    if ((keys.revents & POLLIN) == 0) return kExitTopFailure;  // hung up
    switch (read_keys(STDIN_FILENO, input, redraw)) {
      case KeysResult::kGoOn:
        break;
      case KeysResult::kQuit:
        return 0;
      case KeysResult::kGone:
        return kExitTopFailure;
    }
  }
}

}  // namespace

int run_top(const std::vector<std::string_view>& args, char* const* envp) {
  TopOptions options;
  std::string error;
  if (!parse_top_arguments(args, options, error)) return fail(kExitTopUsage, error);
  if (options.help) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  std::string given;
  if (!caller_socket(envp, given, error)) return fail(kExitTopUsage, error);
  const StatusSource source(envp, server_places(envp, given, getuid()));
  try {
    return options.batch ? run_batch(options, source, envp) : run_view(options, source);
  } catch (const std::exception& failure) {
    // The terminal is back as it was: the view's destructor ran.
    return fail(kExitTopFailure, std::string("top: ") + failure.what());
  }
}

}  // namespace gpulimit::cli
