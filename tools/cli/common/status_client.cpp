#include "common/status_client.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/protocol/messages.h"

namespace gpulimit::cli {
namespace {

// Closes the descriptor on every way out.
class Connection {
 public:
  explicit Connection(int fd) : fd_(fd) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

bool request_status(const std::string& socket, std::string& json, std::string& error,
                    std::chrono::seconds timeout) {
  const Connection connection(protocol::connect_to(socket, error));
  if (connection.fd() < 0) return false;
  const std::string server = "gpulimitd at " + socket;

  timeval receive_timeout{};
  receive_timeout.tv_sec = timeout.count();
  setsockopt(connection.fd(), SOL_SOCKET, SO_RCVTIMEO, &receive_timeout, sizeof receive_timeout);

  const auto request = protocol::make<protocol::StatusRequest>();
  if (!protocol::send_message(connection.fd(), &request, sizeof request)) {
    error = "cannot ask " + server + " for its status: " + std::strerror(errno);
    return false;
  }
  std::vector<char> buffer(protocol::kMaxMessageSize);
  const ssize_t got =
      protocol::receive_message(connection.fd(), buffer.data(), buffer.size(), nullptr);
  if (got < 0) {
    error = errno == EAGAIN || errno == EWOULDBLOCK
                ? server + " did not answer within " + std::to_string(timeout.count()) + " s"
                : server + ": " + std::strerror(errno);
    return false;
  }
  if (got == 0) {
    error = server + " closed the connection without answering";
    return false;
  }
  const std::size_t size = static_cast<std::size_t>(got);
  if (const protocol::Problem problem = protocol::check(buffer.data(), size);
      problem != protocol::Problem::kNone) {
    error = server + " answered with a " + protocol::describe(problem);
    return false;
  }
  protocol::Header header;
  std::memcpy(&header, buffer.data(), sizeof header);
  if (header.type == protocol::Type::kRefused) {
    protocol::Refused refused;
    std::memcpy(&refused, buffer.data(), sizeof refused);
    refused.reason[sizeof refused.reason - 1] = '\0';
    error = server + " refused: " + refused.reason;
    return false;
  }
  if (header.type != protocol::Type::kStatusReply) {
    error = server + " answered with a message other than its status (type " +
            std::to_string(static_cast<unsigned>(header.type)) + ")";
    return false;
  }
  json.assign(buffer.data() + sizeof header, size - sizeof header);
  return true;
}

}  // namespace gpulimit::cli
