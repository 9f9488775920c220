#include "common/server_start.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "common/exec_arguments.h"
#include "common/server_choice.h"
#include "common/server_program.h"
#include "gpulimit/options/environment.h"
#include "gpulimit/options/option_table.h"

namespace gpulimit::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The longest the helper goes without looking again: a server binds its
// socket (the event inotify reports) a moment before it listens.
constexpr std::chrono::milliseconds kRecheckInterval{20};

bool is_left_out(std::string_view name) {
  return name == "LD_PRELOAD" || name == "CUDA_VISIBLE_DEVICES" ||
         options::is_option_variable(name);
}

std::string describe_end(int wait_status) {
  if (WIFEXITED(wait_status))
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int number = WTERMSIG(wait_status);
    const char* name = sigabbrev_np(number);
    return "was killed by signal " + std::to_string(number) +
           (name ? " (SIG" + std::string(name) + ")" : std::string());
  }
  return "ended";
}

void close_descriptors_from(int first) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, first, ~0U, 0) == 0) return;
#endif
  const long most = sysconf(_SC_OPEN_MAX);
  for (int fd = first; fd < std::min(most < 0 ? 1024L : most, 65536L); ++fd)
    close(fd);
}

// In the server's process, forked from the helper: never returns.
[[noreturn]] void become_server(int null_fd, int log_fd, const std::vector<char*>& argv,
                                const std::vector<char*>& envp) {
  setsid();
  // Above 2 first: a caller that closed its stdin or stdout would have
  // made one of them 0, 1 or 2, which dup2 onto itself leaves close-on-exec.
  null_fd = fcntl(null_fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  log_fd = fcntl(log_fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  dup2(null_fd, STDIN_FILENO);
  dup2(log_fd, STDOUT_FILENO);
  dup2(log_fd, STDERR_FILENO);
  close_descriptors_from(STDERR_FILENO + 1);
  // A daemon starts clean of what its caller set: no signal blocked or
  // ignored (nohup ignores SIGHUP; a shell may ignore SIGINT).
  for (int number = 1; number < NSIG; ++number)
    signal(number, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(argv[0], argv.data(), envp.data());
  dprintf(STDERR_FILENO, "gpulimit: cannot run %s: %s\n", argv[0], std::strerror(errno));
  _exit(127);
}

struct Launch {
  std::string program;
  std::string socket;
  std::string log;
};

// In the helper: waits until a server accepts connections at the socket.
// 0 when one does; else 1, with one line written to `report`.
int wait_until_listening(const Launch& launch, pid_t server, int report) {
  const auto fail = [report](const std::string& message) {
    const std::string line = message + "\n";
    [[maybe_unused]] const ssize_t ignored = write(report, line.data(), line.size());
    return 1;
  };
  // Wakes the helper as soon as the socket appears, rather than on a timer.
  const int events = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (events >= 0)
    inotify_add_watch(events, directory_of(launch.socket).c_str(), IN_CREATE | IN_MOVED_TO);

  const std::string log_note = " (log: " + launch.log + ")";
  const Clock::time_point deadline = Clock::now() + kServerStartTimeout;
  std::string reason;
  for (;;) {
    if (accepts_connections(launch.socket, reason)) return 0;
    int status = 0;
    if (waitpid(server, &status, WNOHANG) == server) {
      // One that lost a race with a server another gpulimit started exits
      // too: that server will do.
      if (accepts_connections(launch.socket, reason)) return 0;
      return fail(launch.program + " " + describe_end(status) +
                  " before it accepted connections at " + launch.socket + log_note);
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      kill(server, SIGTERM);
      return fail(launch.program + " did not accept connections at " + launch.socket + " within " +
                  std::to_string(kServerStartTimeout.count()) + " s" + log_note);
    }
    const auto wait = std::min<Clock::duration>(deadline - now, kRecheckInterval);
    const int wait_ms =
        static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count());
    pollfd watch{events, POLLIN, 0};
    poll(&watch, events >= 0 ? 1 : 0, wait_ms);
    char drained[4096];
    while (events >= 0 && read(events, drained, sizeof drained) > 0) {
    }
  }
}

bool make_private_directory(const std::string& directory, uid_t uid, std::string& error) {
  if (mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) {
    error = "cannot create " + directory + ": " + std::strerror(errno);
    return false;
  }
  std::string reason;
  if (!is_private_directory(directory, uid, reason)) {
    error = "will not start gpulimitd there: " + reason;
    return false;
  }
  return true;
}

// Reads `fd` to its end.
std::string read_all(int fd) {
  std::string text;
  char buffer[512];
  for (;;) {
    const ssize_t got = read(fd, buffer, sizeof buffer);
    if (got > 0) {
      text.append(buffer, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  while (!text.empty() && text.back() == '\n')
    text.pop_back();
  return text;
}

}  // namespace

std::vector<std::string> server_environment(char* const* envp) {
  std::vector<std::string> environment;
  for (char* const* entry = envp; entry && *entry; ++entry)
    if (!is_left_out(options::variable_name(*entry))) environment.emplace_back(*entry);
  return environment;
}

bool start_server(const std::string& socket, uid_t uid, char* const* envp, std::string& error) {
  Launch launch;
  if (!find_server_program(launch.program, error)) return false;
  launch.socket = socket;
  const std::string directory = directory_of(socket);
  launch.log = directory + "/gpulimitd.log";
  if (!make_private_directory(directory, uid, error)) return false;

  // Everything the two forked processes use is made here, before forking.
  const std::vector<std::string> argv_text = {launch.program, "--socket", socket, "--idle-exit-s",
                                              std::to_string(kServerIdleExitSeconds)};
  const std::vector<std::string> envp_text = server_environment(envp);
  const std::vector<char*> argv = pointers_to(argv_text);
  const std::vector<char*> server_envp = pointers_to(envp_text);

  const int log_fd =
      open(launch.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (log_fd < 0) {
    error = "cannot open " + launch.log + ": " + std::strerror(errno);
    return false;
  }
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int report[2] = {-1, -1};
  if (null_fd < 0 || pipe2(report, O_CLOEXEC) != 0) {
    error = std::string("cannot start gpulimitd: ") + std::strerror(errno);
    close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return false;
  }

  // With SIGCHLD ignored (a caller's choice the job inherits, and gets
  // back below) children are reaped unseen and waitpid cannot tell how
  // they ended.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  struct sigaction caller_action {};
  sigaction(SIGCHLD, &default_action, &caller_action);

  const pid_t helper = fork();
  if (helper == 0) {
    close(report[0]);
    const pid_t server = fork();
    if (server == 0) become_server(null_fd, log_fd, argv, server_envp);
    close(log_fd);
    close(null_fd);
    if (server < 0) {
      dprintf(report[1], "cannot start gpulimitd: fork: %s\n", std::strerror(errno));
      _exit(1);
    }
    _exit(wait_until_listening(launch, server, report[1]));
  }
  const int fork_error = errno;
  close(report[1]);
  close(log_fd);
  close(null_fd);
  if (helper < 0) {
    close(report[0]);
    sigaction(SIGCHLD, &caller_action, nullptr);
    error = std::string("cannot start gpulimitd: fork: ") + std::strerror(fork_error);
    return false;
  }
  const std::string message = read_all(report[0]);
  close(report[0]);
  int status = 0;
  pid_t waited = -1;
  do {
    waited = waitpid(helper, &status, 0);
  } while (waited < 0 && errno == EINTR);
  sigaction(SIGCHLD, &caller_action, nullptr);
  if (waited == helper && WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  if (!message.empty()) {
    error = message;
  } else if (waited != helper) {
    error = std::string("cannot start gpulimitd: waitpid: ") + std::strerror(errno);
  } else {
    error = "cannot start gpulimitd: the process starting it " + describe_end(status);
  }
  return false;
}

}  // namespace gpulimit::cli
