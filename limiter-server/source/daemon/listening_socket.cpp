#include "gpulimit/server/daemon/listening_socket.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpulimit/protocol/channel.h"

namespace gpulimit::server {
namespace {

std::string describe_errno(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

std::string parent_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Creates `dir` (its parent must exist) or checks the one there: a real
// directory, this user's, writable by nobody else. In user mode it must be
// private, since the socket's peers are then trusted to be this user.
Result<void> prepare_directory(const std::string& dir, ServerMode mode, bool own_directory) {
  const mode_t wanted = mode == ServerMode::kSystem ? 0755 : 0700;
  if (::mkdir(dir.c_str(), wanted) != 0 && errno != EEXIST)
    return fail(describe_errno("cannot create " + dir));
  struct stat status {};
  if (::stat(dir.c_str(), &status) != 0) return fail(describe_errno("cannot stat " + dir));
  if (!S_ISDIR(status.st_mode)) return fail(dir + " is not a directory");
  if (!own_directory) return {};  // the caller's choice, as it is
  if (::lstat(dir.c_str(), &status) != 0 || !S_ISDIR(status.st_mode))
    return fail(dir + " is a symbolic link; refusing to use it");
  if (status.st_uid != ::geteuid())
    return fail(dir + " belongs to uid " + std::to_string(status.st_uid) + ", not to uid " +
                std::to_string(::geteuid()) + "; refusing to use it");
  const mode_t others_write = mode == ServerMode::kSystem ? 0022 : 0077;
  if ((status.st_mode & others_write) != 0 && ::chmod(dir.c_str(), wanted) != 0)
    return fail(describe_errno("cannot make " + dir + " private"));
  return {};
}

// The pid written in the lock file by the server that holds it, for the message.
std::string holder_of(int lock_fd) {
  char text[32] = {};
  const ssize_t got = ::pread(lock_fd, text, sizeof text - 1, 0);
  if (got <= 0) return "";
  std::string pid(text, static_cast<std::size_t>(got));
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' '))
    pid.pop_back();
  return pid.empty() ? "" : " (pid " + pid + ")";
}

// One server per socket: an exclusive lock on "<socket>.lock", held for the
// server's life. A server that dies drops it with its descriptors.
Result<int> lock_socket(const std::string& path) {
  const std::string lock_path = path + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return fail(describe_errno("cannot open " + lock_path));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string holder = holder_of(fd);
    ::close(fd);
    return fail("another gpulimitd" + holder + " already serves " + path);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // Only the message of a second server would lack the pid.
  }
  return fd;
}

// Removes a socket file left by a server that died; refuses a live one and
// anything that is not a socket.
Result<void> clear_stale_socket(const std::string& path) {
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) return {};
    return fail(describe_errno("cannot stat " + path));
  }
  if (!S_ISSOCK(status.st_mode))
    return fail(path + " exists and is not a socket; refusing to replace it");
  std::string ignored;
  const int probe = protocol::connect_to(path, ignored);
  if (probe >= 0) {
    ::close(probe);
    return fail("another server already listens on " + path);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return fail(describe_errno("cannot remove the stale socket " + path));
  return {};
}

}  // namespace

Result<std::unique_ptr<ListeningSocket>> ListeningSocket::open(const std::string& path,
                                                               ServerMode mode,
                                                               bool own_directory) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof address.sun_path)
    return fail("socket path is empty or longer than " +
                std::to_string(sizeof address.sun_path - 1) + " bytes: " + path);
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);

  if (Result<void> prepared = prepare_directory(parent_of(path), mode, own_directory); !prepared)
    return fail(prepared.error());
  Result<int> lock_fd = lock_socket(path);
  if (!lock_fd) return fail(lock_fd.error());
  const auto give_up = [&](const std::string& message) {
    ::close(*lock_fd);
    return fail(message);
  };
  if (Result<void> cleared = clear_stale_socket(path); !cleared) return give_up(cleared.error());

  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return give_up(describe_errno("socket"));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const std::string message = describe_errno("cannot bind " + path);
    ::close(fd);
    return give_up(message);
  }
  const mode_t socket_mode = mode == ServerMode::kSystem ? 0666 : 0600;
  struct stat status {};
  if (::chmod(path.c_str(), socket_mode) != 0 || ::lstat(path.c_str(), &status) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    const std::string message = describe_errno("cannot set up " + path);
    ::close(fd);
    ::unlink(path.c_str());
    return give_up(message);
  }
  return std::unique_ptr<ListeningSocket>(
      new ListeningSocket(path, fd, *lock_fd, status.st_dev, status.st_ino));
}

ListeningSocket::~ListeningSocket() {
  struct stat status {};
  if (::lstat(path_.c_str(), &status) == 0 && status.st_dev == device_ && status.st_ino == inode_)
    ::unlink(path_.c_str());
  ::close(fd_);
  ::close(lock_fd_);  // last: the next server may start once the socket is gone
}

}  // namespace gpulimit::server
