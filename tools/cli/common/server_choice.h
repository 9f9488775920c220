// Which gpulimitd a job is time-sliced by, and which one `gpulimit status`
// asks: the first of
//  1. the socket the caller's GPULIMIT_SOCKET names (an enclosing gpulimit,
//     a batch system, an administrator): used as it is, never started;
//  2. the system server's, protocol::kSystemSocketPath, if one listens there;
//  3. the user's own, protocol::user_socket_path, started there on demand
//     when nobody listens (server_start.h).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace gpulimit::cli {

struct ServerPlaces {
  std::string caller;  // GPULIMIT_SOCKET as the caller set it; empty when unset
  std::string system;
  std::string user;
  uid_t uid = 0;  // whose server `user` is
};

// The places for a caller with environment `envp` (GPULIMIT_SOCKET already
// checked: `caller_socket`) and user `uid`.
ServerPlaces server_places(char* const* envp, std::string_view caller_socket, uid_t uid);

// GPULIMIT_SOCKET as the caller set it in `envp` (the first counts, as with
// getenv), checked; empty when unset. False with `error` set to one line
// when it is not a socket path.
bool caller_socket(char* const* envp, std::string& socket, std::string& error);

enum class StartServer : bool { kNo, kOnDemand };

// The socket of the server to use, by the order above. False with `error`
// set to one line: where nobody listens, or why no server could be started.
bool choose_server(const ServerPlaces& places, StartServer start, char* const* envp,
                   std::string& socket, std::string& error);

// Whether a server accepts connections at `socket` (the connection is
// closed at once); `reason` says why not.
bool accepts_connections(const std::string& socket, std::string& reason);

// Whether `directory` is one `uid` owns and no one else can write to: only
// then is a socket in it the user's own. False with `reason` set.
bool is_private_directory(const std::string& directory, uid_t uid, std::string& reason);

// The directory a socket lies in: "/a/b" for "/a/b/s".
std::string directory_of(std::string_view socket);

}  // namespace gpulimit::cli
