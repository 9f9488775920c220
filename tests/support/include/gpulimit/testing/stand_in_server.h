// A stand-in for gpulimitd: it listens on a unix socket, answers Hello with
// Welcome and a read-only board (or Refused), a StatusRequest with the
// status the test gives, records every message it receives, and changes a
// token word only when the test says so. It schedules nothing by itself.
// It serves from a thread of the process that holds it: the launch gate's
// tests hold it in the test, the CLI's tests run it as a program of its own
// that the gpulimit command starts (tests/integration/cli/stand_in_server.cpp).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/protocol/messages.h"
#include "gpulimit/shm/board_mapping.h"

namespace gpulimit::testing {

// CLOCK_MONOTONIC in nanoseconds: the clock of the simulator's trace.
uint64_t monotonic_ns();

// One message a client sent.
struct Received {
  uint64_t at_ns = 0;  // when the server read it
  pid_t peer = 0;      // the kernel's word on the sender (SO_PEERCRED)
  gpulimit::protocol::Type type{};
  std::string tenant;         // Hello
  int32_t claimed_pid = 0;    // Hello
  uint32_t device_count = 0;  // Hello
  uint32_t sm_percent = 0;    // Hello
  uint32_t board_device = 0;  // Want, Idle, Ack
  uint32_t grant = 0;         // Idle, Ack
};

class StandInServer {
 public:
  // A board with `devices` devices named as the simulator names its devices
  // 0, 1, ..., every token 0; listening on `socket_path`.
  StandInServer(std::string socket_path, uint32_t devices = 1, uint32_t quantum_us = 4000);
  StandInServer(const StandInServer&) = delete;
  StandInServer& operator=(const StandInServer&) = delete;
  ~StandInServer();

  const std::string& socket_path() const { return socket_path_; }

  // The tenant number Welcome gives `tenant` (numbered from 1 in the order of
  // their first Hello; a tenant may be named before it says Hello).
  uint32_t tenant_number(const std::string& tenant);

  // Board changes, each followed by a futex wake of the token word, as the
  // server does. grant(): a new grant number, then token_held(tenant).
  void grant(uint32_t device, uint32_t tenant);
  void revoke(uint32_t device);  // token_revoked(the holder)
  // The same moves with no wake: what a waiter finds whose wakes all came
  // between its look at the token and its futex call.
  void grant_unwoken(uint32_t device, uint32_t tenant);
  void revoke_unwoken(uint32_t device);
  void set_waiting(uint32_t device, uint32_t waiting);
  uint32_t grant_number(uint32_t device) const;
  uint32_t token(uint32_t device) const;

  // Answers every later Hello with Refused and this reason.
  void refuse_with(std::string reason);
  // While set, closes the connection on Hello without answering.
  void hang_up_on_hello(bool hang_up);
  // Answers every later StatusRequest with a StatusReply of `json` (none
  // are answered before).
  void answer_status_with(std::string json);

  // The server goes: every connection and the listening socket close, the
  // socket file is removed.
  void stop();

  // Every message received so far, in order.
  std::vector<Received> received() const;
  // Waits for a message for which `match` holds; the first one, or nothing
  // after `timeout`.
  std::optional<Received> wait_for(const std::function<bool(const Received&)>& match,
                                   std::chrono::milliseconds timeout) const;
  // Waits until `count` messages for which `match` holds have come.
  bool wait_for_count(const std::function<bool(const Received&)>& match, size_t count,
                      std::chrono::milliseconds timeout) const;
  // How many connections are open now.
  size_t connections() const;
  // When the last connection was accepted (when the server started, before
  // the first).
  std::chrono::steady_clock::time_point last_connection() const;

 private:
  void serve();
  void accept_one();
  void read_one(int fd, pid_t peer);
  void wake(uint32_t device);

  std::string socket_path_;
  std::unique_ptr<gpulimit::shm::BoardMapping> board_;
  int listener_ = -1;
  int stop_pipe_[2] = {-1, -1};
  std::thread thread_;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::vector<Received> received_;
  std::vector<std::pair<int, pid_t>> clients_;
  std::vector<std::string> tenants_;
  std::string refusal_;
  std::string status_json_;
  std::chrono::steady_clock::time_point last_connection_ = std::chrono::steady_clock::now();
  bool hang_up_ = false;
  bool stopped_ = false;
};

// The simulator's UUID of device `index`.
void simulated_uuid(uint32_t index, unsigned char out[16]);

}  // namespace gpulimit::testing
