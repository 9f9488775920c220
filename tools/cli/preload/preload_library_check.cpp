#include "preload/preload_library_check.h"

#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gpulimit::cli {
namespace {

constexpr const char* kProbeProgram = "/bin/true";
constexpr int kProbeTimeoutMs = 10'000;
constexpr std::size_t kProbeOutputKept = 200;

// The fields of an ELF header that say what machine it is for; e_type and
// e_machine lie at the same offsets in 32- and 64-bit headers.
struct ElfIdentity {
  unsigned char elf_class = 0;
  unsigned char byte_order = 0;
  uint16_t type = 0;
  uint16_t machine = 0;
};

bool read_elf_identity(const char* path, ElfIdentity& identity, std::string& error) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = std::strerror(errno);
    return false;
  }
  Elf64_Ehdr header{};
  ssize_t got;
  do {
    got = ::pread(fd, &header, sizeof header, 0);
  } while (got < 0 && errno == EINTR);
  ::close(fd);
  if (got < static_cast<ssize_t>(EI_NIDENT + 4) ||
      std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    error = "not an ELF file";
    return false;
  }
  identity.elf_class = header.e_ident[EI_CLASS];
  identity.byte_order = header.e_ident[EI_DATA];
  identity.type = header.e_type;
  identity.machine = header.e_machine;
  return true;
}

bool check_elf(const std::string& library, std::string& error) {
  ElfIdentity ours;
  ElfIdentity theirs;
  std::string reason;
  if (!read_elf_identity("/proc/self/exe", ours, reason)) {
    error = "cannot tell this machine's architecture: /proc/self/exe: " + reason;
    return false;
  }
  if (!read_elf_identity(library.c_str(), theirs, reason)) {
    error = library + ": " + reason;
    return false;
  }
  if (theirs.elf_class != ours.elf_class || theirs.byte_order != ours.byte_order ||
      theirs.machine != ours.machine) {
    error = library + ": an ELF file for another architecture (machine " +
            std::to_string(theirs.machine) + ", this one is " + std::to_string(ours.machine) + ")";
    return false;
  }
  if (theirs.type != ET_DYN) {
    error = library + ": an ELF file but not a shared object";
    return false;
  }
  return true;
}

// Nobody but root can change `path` or put another file in its place.
bool check_ownership(const std::string& library, std::string& error) {
  struct stat status {};
  if (::stat(library.c_str(), &status) != 0) {
    error = library + ": " + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(status.st_mode)) {
    error = library + ": not a regular file";
    return false;
  }
  if (status.st_uid != 0) {
    error = library + ": owned by uid " + std::to_string(status.st_uid) + ", not root";
    return false;
  }
  if (status.st_mode & S_IWOTH) {
    error = library + ": writable by every user";
    return false;
  }
  std::error_code failure;
  const std::filesystem::path canonical = std::filesystem::canonical(library, failure);
  if (failure) {
    error = library + ": " + failure.message();
    return false;
  }
  for (std::filesystem::path directory = canonical.parent_path();;
       directory = directory.parent_path()) {
    if (::stat(directory.c_str(), &status) != 0) {
      error = directory.string() + ": " + std::strerror(errno);
      return false;
    }
    if (status.st_uid != 0) {
      error = library + ": its directory " + directory.string() + " is owned by uid " +
              std::to_string(status.st_uid) + ", not root";
      return false;
    }
    if ((status.st_mode & S_IWOTH) && !(status.st_mode & S_ISVTX)) {
      error = library + ": its directory " + directory.string() + " is writable by every user";
      return false;
    }
    if (directory == directory.root_path()) break;
  }
  return true;
}

int64_t now_ms() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000;
}

// Runs /bin/true with `library` preloaded; its stderr is kept.
bool check_probe_runs(const std::string& library, std::string& error) {
  int output[2];
  if (::pipe2(output, O_CLOEXEC) != 0) {
    error = std::string("cannot start a test program: pipe: ") + std::strerror(errno);
    return false;
  }
  const std::string preload = "LD_PRELOAD=" + library;
  char* const argv[] = {const_cast<char*>(kProbeProgram), nullptr};
  char* const envp[] = {const_cast<char*>(preload.c_str()),
                        const_cast<char*>("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), nullptr};
  const pid_t child = ::fork();
  if (child < 0) {
    error = std::string("cannot start a test program: fork: ") + std::strerror(errno);
    ::close(output[0]);
    ::close(output[1]);
    return false;
  }
  if (child == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, STDIN_FILENO);
      ::dup2(null, STDOUT_FILENO);
    }
    ::dup2(output[1], STDERR_FILENO);
    ::execve(kProbeProgram, argv, envp);
    _exit(127);
  }
  ::close(output[1]);

  std::string printed;
  const int64_t deadline = now_ms() + kProbeTimeoutMs;
  bool timed_out = false;
  for (;;) {
    const int64_t left = deadline - now_ms();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd readable{output[0], POLLIN, 0};
    const int ready = ::poll(&readable, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = ready == 0;
      break;
    }
    char buffer[512];
    const ssize_t got = ::read(output[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // end of file: the program closed stderr or exited
    if (printed.size() < kProbeOutputKept) printed.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(output[0]);
  int status = 0;
  pid_t waited = 0;
  while (!timed_out) {
    waited = ::waitpid(child, &status, WNOHANG);
    if (waited != 0 || now_ms() >= deadline) break;
    ::usleep(10'000);
  }
  if (timed_out || waited == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    error = std::string(kProbeProgram) + " did not exit within " +
            std::to_string(kProbeTimeoutMs / 1000) + " s with " + library + " preloaded";
    return false;
  }
  const std::string what = std::string(kProbeProgram) + " with " + library + " preloaded";
  if (waited < 0) {
    error = what + ": waitpid: " + std::strerror(errno);
    return false;
  }
  if (WIFSIGNALED(status)) {
    error = what + " was killed by signal " + std::to_string(WTERMSIG(status));
    return false;
  }
  if (WEXITSTATUS(status) != 0) {
    error = what + " exited with status " + std::to_string(WEXITSTATUS(status));
    return false;
  }
  if (!printed.empty()) {
    const std::string first_line = printed.substr(0, printed.find('\n'));
    error = what + " printed: " + first_line;
    return false;
  }
  return true;
}

}  // namespace

bool check_preload_library(const std::string& library, std::string& error) {
  return check_ownership(library, error) && check_elf(library, error) &&
         check_probe_runs(library, error);
}

}  // namespace gpulimit::cli
