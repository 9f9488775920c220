#include "test_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/shm/futex.h"

namespace server_test {
namespace {

using Clock = std::chrono::steady_clock;
namespace protocol = gpulimit::protocol;
namespace shm = gpulimit::shm;

bool readable(int fd, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left < 0) return false;
    pollfd ready{fd, POLLIN, 0};
    const int polled = poll(&ready, 1, static_cast<int>(left));
    if (polled < 0 && errno == EINTR) continue;
    return polled > 0;
  }
}

bool wait_for(const std::atomic<uint32_t>& word, const std::function<bool(uint32_t)>& done,
              std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const uint32_t value = word.load(std::memory_order_acquire);
    if (done(value)) return true;
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return false;
    shm::futex_wait(word, value, std::min<Clock::duration>(left, std::chrono::milliseconds(50)));
  }
}

}  // namespace

protocol::Hello make_hello(const HelloOptions& options) {
  auto hello = protocol::make<protocol::Hello>();
  std::strncpy(hello.tenant, options.tenant.c_str(), sizeof hello.tenant - 1);
  hello.claimed_pid = options.claimed_pid.value_or(getpid());
  hello.sm_percent = options.sm_percent;
  hello.weight = options.weight;
  hello.priority = options.priority;
  std::strncpy(hello.ledger_dir, options.ledger_dir.c_str(), sizeof hello.ledger_dir - 1);
  hello.device_count = static_cast<uint32_t>(options.uuids.size());
  for (std::size_t i = 0; i < options.uuids.size() && i < shm::kBoardDevices; ++i)
    std::memcpy(hello.uuids[i], options.uuids[i].data(), 16);
  return hello;
}

TestClient::TestClient(const std::string& socket) {
  std::string error;
  fd_ = protocol::connect_to(socket, error);
}

TestClient::~TestClient() {
  if (fd_ >= 0) close(fd_);
}

bool TestClient::hello(const HelloOptions& options) {
  const protocol::Hello message = make_hello(options);
  // A server that turns a connection away (too many of its user's) answers
  // before the Hello and closes: the send then fails, and the answer waits.
  if (!send_raw(&message, sizeof message) && errno != EPIPE && errno != ECONNRESET) return false;
  if (!readable(fd_, Clock::now() + kAnswerTimeout)) return false;
  std::vector<unsigned char> answer(protocol::kMaxMessageSize);
  int board_fd = -1;
  const ssize_t got = protocol::receive_message(fd_, answer.data(), answer.size(), &board_fd);
  if (got <= 0 ||
      protocol::check(answer.data(), static_cast<std::size_t>(got)) != protocol::Problem::kNone) {
    if (board_fd >= 0) close(board_fd);
    return false;
  }
  protocol::Header header;
  std::memcpy(&header, answer.data(), sizeof header);
  if (header.type == protocol::Type::kRefused) {
    protocol::Refused refused;
    std::memcpy(&refused, answer.data(), sizeof refused);
    refusal_ = std::string(refused.reason, strnlen(refused.reason, sizeof refused.reason));
    if (board_fd >= 0) close(board_fd);
    return false;
  }
  if (header.type != protocol::Type::kWelcome || board_fd < 0) return false;
  std::memcpy(&welcome_, answer.data(), sizeof welcome_);
  std::string error;
  board_ = shm::BoardMapping::map_read_only(board_fd, error);
  if (!board_) {
    close(board_fd);
    return false;
  }
  return true;
}

uint32_t TestClient::token(uint32_t device) const {
  return board().devices[device].token.load(std::memory_order_acquire);
}

uint32_t TestClient::grant(uint32_t device) const {
  return board().devices[device].grant.load(std::memory_order_acquire);
}

bool TestClient::send_raw(const void* data, std::size_t size) {
  return protocol::send_message(fd_, data, size);
}

bool TestClient::want(uint32_t device) {
  auto message = protocol::make<protocol::Want>();
  message.board_device = device;
  return send_raw(&message, sizeof message);
}

bool TestClient::ack(uint32_t device, uint32_t grant) {
  auto message = protocol::make<protocol::Ack>();
  message.board_device = device;
  message.grant = grant;
  return send_raw(&message, sizeof message);
}

bool TestClient::idle(uint32_t device, uint32_t grant) {
  auto message = protocol::make<protocol::Idle>();
  message.board_device = device;
  message.grant = grant;
  return send_raw(&message, sizeof message);
}

std::optional<uint32_t> TestClient::wait_until_held(uint32_t device,
                                                    std::chrono::milliseconds timeout) {
  const uint32_t held = shm::token_held(tenant());
  if (!wait_for(
          board().devices[device].token, [&](uint32_t token) { return token == held; }, timeout))
    return std::nullopt;
  return grant(device);
}

bool TestClient::wait_until_revoked(uint32_t device, std::chrono::milliseconds timeout) {
  const uint32_t revoked = shm::token_revoked(tenant());
  return wait_for(
      board().devices[device].token, [&](uint32_t token) { return token == revoked; }, timeout);
}

bool TestClient::wait_for_token(uint32_t device, uint32_t value,
                                std::chrono::milliseconds timeout) {
  return wait_for(
      board().devices[device].token, [&](uint32_t token) { return token == value; }, timeout);
}

bool TestClient::closed_by_server(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<unsigned char> buffer(protocol::kMaxMessageSize);
  while (readable(fd_, deadline)) {
    const ssize_t got = protocol::receive_message(fd_, buffer.data(), buffer.size(), nullptr);
    if (got == 0) return true;
    if (got < 0 && errno != EAGAIN && errno != EINTR) return true;
  }
  return false;
}

std::optional<nlohmann::json> TestClient::status() {
  const auto request = protocol::make<protocol::StatusRequest>();
  if (!send_raw(&request, sizeof request)) return std::nullopt;
  if (!readable(fd_, Clock::now() + kAnswerTimeout)) return std::nullopt;
  std::vector<unsigned char> reply(protocol::kMaxMessageSize);
  const ssize_t got = protocol::receive_message(fd_, reply.data(), reply.size(), nullptr);
  if (got <= 0 ||
      protocol::check(reply.data(), static_cast<std::size_t>(got)) != protocol::Problem::kNone)
    return std::nullopt;
  protocol::Header header;
  std::memcpy(&header, reply.data(), sizeof header);
  if (header.type != protocol::Type::kStatusReply) return std::nullopt;
  const auto* body = reinterpret_cast<const char*>(reply.data() + sizeof header);
  return nlohmann::json::parse(body, body + (static_cast<std::size_t>(got) - sizeof header),
                               nullptr, false);
}

}  // namespace server_test
