#include "gpulimit/protocol/channel.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace gpulimit::protocol {

namespace {

std::string_view variable(char* const* envp, std::string_view name) {
  for (char* const* entry = envp; entry && *entry; ++entry) {
    std::string_view text(*entry);
    if (text.size() > name.size() && text.starts_with(name) && text[name.size()] == '=')
      return text.substr(name.size() + 1);
  }
  return {};
}

}  // namespace

std::string user_socket_path(char* const* envp, uid_t uid) {
  const std::string_view runtime = variable(envp, "XDG_RUNTIME_DIR");
  if (runtime.starts_with('/')) return std::string(runtime) + "/gpulimit/gpulimitd.sock";
  return "/tmp/gpulimit-" + std::to_string(uid) + "/gpulimitd.sock";
}

int connect_to(const std::string& path, std::string& error) noexcept {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof address.sun_path) {
    error = "socket path too long: " + path;
    return -1;
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    error = "cannot connect to " + path + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_message(int socket, const void* message, std::size_t size, int fd,
                  int second_fd) noexcept {
  iovec io{const_cast<void*>(message), size};
  msghdr header{};
  header.msg_iov = &io;
  header.msg_iovlen = 1;
  const int fds[2] = {fd, second_fd};
  const int count = fd < 0 ? 0 : second_fd < 0 ? 1 : 2;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  if (count > 0) {
    header.msg_control = control;
    header.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    cmsghdr* c = CMSG_FIRSTHDR(&header);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  }
  ssize_t sent;
  do {
    sent = ::sendmsg(socket, &header, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(size);
}

ssize_t receive_message(int socket, void* buffer, std::size_t capacity, int* fd,
                        int* second_fd) noexcept {
  int* kept[2] = {fd, second_fd};
  for (int* slot : kept)
    if (slot) *slot = -1;
  iovec io{buffer, capacity};
  msghdr header{};
  header.msg_iov = &io;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  header.msg_control = control;
  header.msg_controllen = sizeof control;
  ssize_t got;
  do {
    got = ::recvmsg(socket, &header, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return -1;
  // Keep at most the descriptors asked for, in order; close every other
  // one, so a peer cannot make us leak descriptors.
  std::size_t next = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&header); c; c = CMSG_NXTHDR(&header, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int received;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof received);
      if (next < 2 && kept[next]) {
        *kept[next++] = received;
      } else {
        ::close(received);
      }
    }
  }
  if (header.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    for (int* slot : kept)
      if (slot && *slot >= 0) {
        ::close(*slot);
        *slot = -1;
      }
    errno = EMSGSIZE;
    return -1;
  }
  return got;
}

bool peer_credentials(int socket, PeerCredentials& out) noexcept {
  ucred credentials{};
  socklen_t length = sizeof credentials;
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return false;
  out = PeerCredentials{credentials.pid, credentials.uid, credentials.gid};
  return true;
}

}  // namespace gpulimit::protocol
