#include "common/server_choice.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/server_start.h"
#include "gpulimit/options/option_table.h"
#include "gpulimit/options/values.h"
#include "gpulimit/protocol/channel.h"

namespace gpulimit::cli {

ServerPlaces server_places(char* const* envp, std::string_view caller_socket, uid_t uid) {
  return ServerPlaces{std::string(caller_socket), protocol::kSystemSocketPath,
                      protocol::user_socket_path(envp, uid), uid};
}

// Only the socket matters here, not the limits the other variables give.
bool caller_socket(char* const* envp, std::string& socket, std::string& error) {
  const std::string_view name = options::option(options::OptionId::kSocket).variable;
  for (char* const* entry = envp; entry && *entry; ++entry) {
    const std::string_view assignment(*entry);
    if (assignment.size() <= name.size() || !assignment.starts_with(name) ||
        assignment[name.size()] != '=') {
      continue;
    }
    const std::string_view value = assignment.substr(name.size() + 1);
    std::string reason;
    if (!value.empty() && !options::parse_socket_path(value, reason)) {
      error = std::string(assignment) + ": " + reason;
      return false;
    }
    socket = value;
    return true;  // the first counts, as with getenv
  }
  return true;
}

bool accepts_connections(const std::string& socket, std::string& reason) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket.empty() || socket.size() >= sizeof address.sun_path) {
    reason = "not a path a unix socket can have";
    return false;
  }
  std::memcpy(address.sun_path, socket.c_str(), socket.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    reason = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  int rc = 0;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  } while (rc != 0 && errno == EINTR);
  const int failure = errno;
  ::close(fd);
  if (rc == 0) return true;
  reason = std::strerror(failure);
  return false;
}

bool is_private_directory(const std::string& directory, uid_t uid, std::string& reason) {
  struct stat status {};
  if (::lstat(directory.c_str(), &status) != 0) {
    reason = directory + ": " + std::strerror(errno);
    return false;
  }
  // A directory another user made, or can write to, could hold a socket of
  // theirs posing as this user's server.
  if (!S_ISDIR(status.st_mode) || status.st_uid != uid || (status.st_mode & 022) != 0) {
    reason = directory + " is not a directory of uid " + std::to_string(uid) +
             " that only it can write to";
    return false;
  }
  return true;
}

std::string directory_of(std::string_view socket) {
  const std::size_t slash = socket.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(socket.substr(0, slash));
}

bool choose_server(const ServerPlaces& places, StartServer start, char* const* envp,
                   std::string& socket, std::string& error) {
  std::string reason;
  if (!places.caller.empty()) {
    if (!accepts_connections(places.caller, reason)) {
      error = "nobody listens at GPULIMIT_SOCKET=" + places.caller + " (" + reason + ")";
      return false;
    }
    socket = places.caller;
    return true;
  }
  if (accepts_connections(places.system, reason)) {
    socket = places.system;
    return true;
  }

  const std::string directory = directory_of(places.user);
  if (::access(directory.c_str(), F_OK) == 0) {
    if (!is_private_directory(directory, places.uid, reason)) {
      error = "will not use " + places.user + ": " + reason;
      return false;
    }
    if (accepts_connections(places.user, reason)) {
      socket = places.user;
      return true;
    }
  }
  if (start == StartServer::kNo) {
    error = "nobody listens at " + places.system + " or " + places.user;
    return false;
  }
  if (!start_server(places.user, places.uid, envp, error)) return false;
  socket = places.user;
  return true;
}

}  // namespace gpulimit::cli
