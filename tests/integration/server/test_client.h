// One tenant process's side of the protocol, for tests: connects, says
// Hello, maps the board it is given, and speaks Want, Idle and Ack. Usable
// in the test process and in processes forked from it.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpulimit/protocol/messages.h"
#include "gpulimit/shm/board_mapping.h"

namespace server_test {

using Uuid = std::array<unsigned char, 16>;
// Made-up GPUs.
inline constexpr Uuid kGpu0 = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                               0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00};
inline constexpr Uuid kGpu1 = {0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8,
                               0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf, 0xb0};

inline constexpr std::chrono::milliseconds kAnswerTimeout{10'000};

struct HelloOptions {
  std::string tenant = "tenant-a";
  uint32_t sm_percent = 0;
  uint32_t weight = 1;
  gpulimit::protocol::Priority priority = gpulimit::protocol::Priority::kNormal;
  std::string ledger_dir = "/dev/shm";
  std::vector<Uuid> uuids = {kGpu0};
  std::optional<int32_t> claimed_pid;  // default: getpid()
};

gpulimit::protocol::Hello make_hello(const HelloOptions& options);

class TestClient {
 public:
  explicit TestClient(const std::string& socket);
  ~TestClient();
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // Hello, then the answer: true when welcomed (the board is then mapped).
  // A refusal's reason is in refusal().
  bool hello(const HelloOptions& options = {});
  const std::string& refusal() const { return refusal_; }
  const gpulimit::protocol::Welcome& welcome() const { return welcome_; }
  uint32_t tenant() const { return welcome_.tenant_number; }
  // The board index of the i-th UUID of the Hello.
  uint32_t device(std::size_t i = 0) const { return welcome_.board_device[i]; }
  const gpulimit::shm::BoardLayout& board() const { return board_->layout(); }
  uint32_t token(uint32_t device) const;
  uint32_t grant(uint32_t device) const;

  bool want(uint32_t device);
  bool ack(uint32_t device, uint32_t grant);
  bool idle(uint32_t device, uint32_t grant);
  bool send_raw(const void* data, std::size_t size);

  // Waits (on the futex) until this tenant holds the device's token; its
  // grant, or nullopt after the timeout.
  std::optional<uint32_t> wait_until_held(uint32_t device,
                                          std::chrono::milliseconds timeout = kAnswerTimeout);
  // Waits until this tenant's token of the device is revoked.
  bool wait_until_revoked(uint32_t device, std::chrono::milliseconds timeout = kAnswerTimeout);
  // Waits until the token word equals `value`.
  bool wait_for_token(uint32_t device, uint32_t value,
                      std::chrono::milliseconds timeout = kAnswerTimeout);
  // True once the server has closed the connection.
  bool closed_by_server(std::chrono::milliseconds timeout = kAnswerTimeout);

  // StatusRequest, on this connection; the JSON, or nullopt.
  std::optional<nlohmann::json> status();

 private:
  int fd_ = -1;
  gpulimit::protocol::Welcome welcome_{};
  std::unique_ptr<gpulimit::shm::BoardMapping> board_;
  std::string refusal_;
};

}  // namespace server_test
