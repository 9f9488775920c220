// The server's hand on the board (gpulimit/shm/board.h): publishes devices
// by UUID and writes each device's token words in the order the launch gate
// relies on. The only writer of the board.
#pragma once

#include <cstdint>
#include <memory>

#include "gpulimit/server/loop/hello_validation.h"
#include "gpulimit/server/result.h"
#include "gpulimit/server/scheduling/scheduling_types.h"
#include "gpulimit/shm/board_mapping.h"

namespace gpulimit::server {

class TokenBoard {
 public:
  static Result<std::unique_ptr<TokenBoard>> create(uint32_t quantum_us);
  ~TokenBoard();
  TokenBoard(const TokenBoard&) = delete;
  TokenBoard& operator=(const TokenBoard&) = delete;

  // The board index of the device with `uuid`, publishing it first if no
  // client has named it yet. Fails when every slot is taken.
  Result<DeviceIndex> publish(const DeviceUuid& uuid);
  uint32_t device_count() const;
  DeviceUuid uuid(DeviceIndex device) const;

  // `tenant` holds the device's token now: `grant` is raised, then `token`
  // set, then its waiters woken. Returns the grant's number.
  uint32_t grant(DeviceIndex device, TenantNumber tenant);
  // `tenant` must give the token back.
  void revoke(DeviceIndex device, TenantNumber tenant);
  // Nobody holds the token.
  void clear(DeviceIndex device);
  uint32_t grant_number(DeviceIndex device) const;
  void set_waiting(DeviceIndex device, uint32_t waiting);
  // Every token to 0, with its waiters woken: the server is going away.
  void clear_all();

  // The board for a client, read-only; kept open for the board's lifetime and
  // sent with every Welcome (each receiver gets its own copy).
  int read_only_descriptor() const { return read_only_fd_; }
  const shm::BoardLayout& layout() const { return mapping_->layout(); }

 private:
  TokenBoard(std::unique_ptr<shm::BoardMapping> mapping, int read_only_fd)
      : mapping_(std::move(mapping)), read_only_fd_(read_only_fd) {}
  shm::BoardDevice& device_at(DeviceIndex device);
  void set_token(DeviceIndex device, uint32_t token);

  std::unique_ptr<shm::BoardMapping> mapping_;
  int read_only_fd_;
};

}  // namespace gpulimit::server
