#include "gate/gate_connection.h"

#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpulimit/protocol/channel.h"

namespace gpulimit::gate {
namespace {

// How long the handshake may take before the server counts as unreachable:
// cuInit waits for it.
constexpr time_t kHandshakeSeconds = 5;

void set_timeouts(int socket, time_t seconds) {
  const timeval timeout{seconds, 0};
  setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
}

JoinResult fail(JoinResult::Outcome outcome, std::string reason, int socket, int board_fd = -1,
                int lease_fd = -1) {
  if (socket >= 0) ::close(socket);
  if (board_fd >= 0) ::close(board_fd);
  if (lease_fd >= 0) ::close(lease_fd);
  JoinResult result;
  result.outcome = outcome;
  result.reason = std::move(reason);
  return result;
}

// The answer to Hello, or why there is none.
JoinResult read_answer(int socket, const protocol::Hello& hello) {
  using Outcome = JoinResult::Outcome;
  union {
    protocol::Header header;
    protocol::Welcome welcome;
    protocol::Refused refused;
  } answer{};
  int board_fd = -1;
  int lease_fd = -1;
  const ssize_t size =
      protocol::receive_message(socket, &answer, sizeof answer, &board_fd, &lease_fd);
  if (size == 0) return fail(Outcome::kNoAnswer, "gpulimitd hung up before answering", socket);
  if (size < 0) {
    const bool late = errno == EAGAIN || errno == EWOULDBLOCK;
    return fail(Outcome::kNoAnswer,
                late ? "gpulimitd did not answer within " + std::to_string(kHandshakeSeconds) + " s"
                     : std::string("cannot read gpulimitd's answer: ") + std::strerror(errno),
                socket, board_fd, lease_fd);
  }
  if (const protocol::Problem problem = protocol::check(&answer, static_cast<size_t>(size));
      problem != protocol::Problem::kNone) {
    return fail(Outcome::kRefused,
                std::string("gpulimitd's answer cannot be read: ") + protocol::describe(problem),
                socket, board_fd, lease_fd);
  }
  if (answer.header.type == protocol::Type::kRefused) {
    const char* text = answer.refused.reason;
    return fail(Outcome::kRefused, std::string(text, strnlen(text, sizeof answer.refused.reason)),
                socket, board_fd, lease_fd);
  }
  if (answer.header.type != protocol::Type::kWelcome)
    return fail(Outcome::kRefused, "gpulimitd answered Hello with neither Welcome nor Refused",
                socket, board_fd, lease_fd);
  const protocol::Welcome& welcome = answer.welcome;
  if (welcome.tenant_number == 0 || welcome.tenant_number > shm::kMaxTenantNumber ||
      welcome.device_count != hello.device_count)
    return fail(Outcome::kRefused, "gpulimitd's welcome does not match this process's hello",
                socket, board_fd, lease_fd);
  if (board_fd < 0 || (welcome.leased_devices != 0) != (lease_fd >= 0))
    return fail(Outcome::kRefused,
                board_fd < 0 ? "gpulimitd's welcome came without its board"
                             : "gpulimitd's welcome and its lease page do not match",
                socket, board_fd, lease_fd);
  std::string error;
  std::unique_ptr<shm::BoardMapping> board = shm::BoardMapping::map_read_only(board_fd, error);
  // Not closed on failure: whether the mapping took the descriptor then is
  // not promised, and a second close could hit a descriptor of the program.
  if (!board) return fail(Outcome::kRefused, error, socket, -1, lease_fd);
  std::unique_ptr<shm::LeasePage> leases;
  if (lease_fd >= 0) {
    leases = shm::LeasePage::map_read_only(lease_fd, error);
    if (!leases) return fail(Outcome::kRefused, error, socket);  // as the board's, not closed
  }

  JoinResult result;
  result.outcome = Outcome::kWelcome;
  result.socket = socket;
  result.board = std::move(board);
  result.leases = std::move(leases);
  result.welcome = welcome;
  return result;
}

}  // namespace

JoinResult join_server(const std::string& path, const protocol::Hello& hello) noexcept {
  try {
    std::string error;
    const int socket = protocol::connect_to(path, error);
    if (socket < 0) return fail(JoinResult::Outcome::kUnreachable, error, -1);
    set_timeouts(socket, kHandshakeSeconds);
    if (!protocol::send_message(socket, &hello, sizeof hello)) {
      // A server that turns a connection away (too many of this user's)
      // answers Refused before it reads the Hello, and closes: its reason
      // is still there to read, and says more than the broken pipe.
      const int send_error = errno;
      const std::string why = std::string("cannot send to gpulimitd: ") + std::strerror(send_error);
      if (send_error != EPIPE && send_error != ECONNRESET)
        return fail(JoinResult::Outcome::kNoAnswer, why, socket);
      JoinResult answered = read_answer(socket, hello);  // the socket is its now
      if (answered.outcome == JoinResult::Outcome::kRefused) return answered;
      return fail(JoinResult::Outcome::kNoAnswer, why, answered.socket);  // -1 unless welcomed
    }
    JoinResult result = read_answer(socket, hello);
    // From now on the watcher polls the socket, and a send waits for a server
    // that is slow to read rather than drop a Want or an Ack.
    if (result.socket >= 0) set_timeouts(result.socket, 0);
    return result;
  } catch (...) {
    JoinResult result;
    result.outcome = JoinResult::Outcome::kNoAnswer;
    return result;  // out of memory: try again later
  }
}

template <typename Message>
bool GateConnection::send(const Message& message) noexcept {
  // Dekker with close(): either close() sees this send under way and waits
  // for it, or this send sees the connection closed.
  senders_.fetch_add(1, std::memory_order_seq_cst);
  const bool sent = !closed_.load(std::memory_order_seq_cst) &&
                    protocol::send_message(socket_, &message, sizeof message);
  senders_.fetch_sub(1, std::memory_order_seq_cst);
  return sent;
}

bool GateConnection::send_want(uint32_t board_device) noexcept {
  auto want = protocol::make<protocol::Want>();
  want.board_device = board_device;
  return send(want);
}

bool GateConnection::send_lease_request(uint32_t board_device, uint64_t need) noexcept {
  auto request = protocol::make<protocol::LeaseRequest>();
  request.board_device = board_device;
  request.need = need;
  return send(request);
}

bool GateConnection::send_idle(uint32_t board_device, uint32_t grant) noexcept {
  auto idle = protocol::make<protocol::Idle>();
  idle.board_device = board_device;
  idle.grant = grant;
  return send(idle);
}

bool GateConnection::send_ack(uint32_t board_device, uint32_t grant) noexcept {
  auto ack = protocol::make<protocol::Ack>();
  ack.board_device = board_device;
  ack.grant = grant;
  return send(ack);
}

void GateConnection::close() noexcept {
  if (closed_.exchange(true, std::memory_order_seq_cst)) return;
  ::shutdown(socket_, SHUT_RDWR);
  // A send under way returns at once on a shut-down socket: the descriptor
  // is closed only when no thread can still write to it (or to whatever
  // would reuse its number).
  while (senders_.load(std::memory_order_seq_cst) != 0)
    sched_yield();
  ::close(socket_);
}

void GateConnection::close_in_forked_child() noexcept {
  if (closed_.exchange(true, std::memory_order_relaxed)) return;
  ::close(socket_);
}

}  // namespace gpulimit::gate
