// The process's connection to gpulimitd: the handshake that attaches it
// (Hello; then Welcome with the board's descriptor, or Refused) and the
// messages a gated process sends afterwards (Want, Idle, Ack, LeaseRequest). Any thread may
// send; the connection watcher closes the connection when the server goes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "gpulimit/protocol/messages.h"
#include "gpulimit/shm/board_mapping.h"
#include "gpulimit/shm/lease_page.h"

namespace gpulimit::gate {

// One attempt to join gpulimitd.
struct JoinResult {
  enum class Outcome {
    kWelcome,      // attached: `socket`, `board` and `welcome` are set
    kRefused,      // the server said no, or cannot be understood: do not retry
    kUnreachable,  // nobody listens at the socket
    kNoAnswer,     // a server listens but hung up or did not answer: try later
  };
  Outcome outcome = Outcome::kUnreachable;
  int socket = -1;
  std::unique_ptr<shm::BoardMapping> board;
  std::unique_ptr<shm::LeasePage> leases;  // when welcome.leased_devices is not 0
  protocol::Welcome welcome{};
  std::string reason;  // otherwise: one line for the user
};

// Connects to `path`, says `hello` and reads the answer (at most a few
// seconds: a server that does not answer counts as unreachable).
JoinResult join_server(const std::string& path, const protocol::Hello& hello) noexcept;

class GateConnection {
 public:
  explicit GateConnection(int socket) noexcept : socket_(socket) {}
  GateConnection(const GateConnection&) = delete;
  GateConnection& operator=(const GateConnection&) = delete;

  int socket() const noexcept { return socket_; }

  // False once the connection is closed or the server is gone.
  bool send_want(uint32_t board_device) noexcept;
  bool send_idle(uint32_t board_device, uint32_t grant) noexcept;
  bool send_ack(uint32_t board_device, uint32_t grant) noexcept;
  bool send_lease_request(uint32_t board_device, uint64_t need) noexcept;

  // Stops every later send, lets the ones under way finish (they fail fast:
  // the socket is shut down first) and closes the socket.
  void close() noexcept;
  // In a forked child, whose other threads are gone: closes the inherited
  // socket at once. Async-signal-safe.
  void close_in_forked_child() noexcept;

 private:
  template <typename Message>
  bool send(const Message& message) noexcept;

  const int socket_;
  std::atomic<uint32_t> senders_{0};
  std::atomic<bool> closed_{false};
};

}  // namespace gpulimit::gate
