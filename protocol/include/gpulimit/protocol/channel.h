// The unix socket both sides use, and one message on it at a time. Every
// function here retries on EINTR, never throws, and never raises SIGPIPE.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace gpulimit::protocol {

// Where a server listens. Per-user mode: $XDG_RUNTIME_DIR/gpulimit/gpulimitd.sock
// when XDG_RUNTIME_DIR is set in `envp`, else /tmp/gpulimit-<uid>/gpulimitd.sock.
// System mode: kSystemSocketPath.
std::string user_socket_path(char* const* envp, uid_t uid);
inline constexpr const char* kSystemDirectory = "/run/gpulimit";
inline constexpr const char* kSystemSocketPath = "/run/gpulimit/gpulimitd.sock";
// Present, root's, while the system server serves with the administrator's
// policy, and left behind when it dies: libgpulimit.so then fails closed
// (limiter-server/README.md, "Where the administrator enforces").
inline constexpr const char* kEnforcementMarkerPath = "/run/gpulimit/enforcing";
static_assert(std::string_view(kSystemSocketPath).starts_with(kSystemDirectory) &&
              std::string_view(kEnforcementMarkerPath).starts_with(kSystemDirectory));

// Connects a SOCK_SEQPACKET | SOCK_CLOEXEC socket to `path`. -1 with `error`
// set to one line when nobody listens there.
int connect_to(const std::string& path, std::string& error) noexcept;

// Sends one message, with `fd` attached (SCM_RIGHTS) when not -1, and
// `second_fd` after it when that is not -1 either.
bool send_message(int socket, const void* message, std::size_t size, int fd = -1,
                  int second_fd = -1) noexcept;

// Receives one message into `buffer`. Returns its size; 0 when the peer
// closed; -1 on error or when the message did not fit in `capacity` (it is
// then consumed and dropped). A descriptor that came with it is stored in
// `*fd` (O_CLOEXEC) when `fd` is not null, else closed; *fd is -1 if none;
// a second one likewise in `*second_fd`. Any more are closed.
ssize_t receive_message(int socket, void* buffer, std::size_t capacity, int* fd,
                        int* second_fd = nullptr) noexcept;

// The kernel's word on who is at the other end of a connected socket.
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};
bool peer_credentials(int socket, PeerCredentials& out) noexcept;

}  // namespace gpulimit::protocol
