// The server's hand on the board (gpulimit/shm/board.h): publishes devices
// by UUID, withdraws them when no process uses them any more, and writes
// each device's token words in the order the launch gate relies on. The
// only writer of the board.
//
// A withdrawn slot is taken again by the next device published. Its UUID is
// zeroed first, so that a process that still maps the board never matches
// its old device there; no process was welcomed with the slot any more
// (that is what withdrawing means), and a later one learns its slot from
// its own Welcome. `device_count` on the board counts the slots ever
// written, the withdrawn ones among them.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <vector>

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

  // The board index of each device of `uuids` (in order), publishing
  // those no client has named yet. All or nothing: when the slots free do
  // not suffice for all of them, it fails and writes nothing.
  Result<std::vector<DeviceIndex>> publish(const std::vector<DeviceUuid>& uuids);
  // The device's slot is free again: its UUID zeroed, its token 0.
  void withdraw(DeviceIndex device);
  // Slots ever written (the bound of every loop over devices); those in
  // use are published and not withdrawn.
  uint32_t device_count() const;
  bool in_use(DeviceIndex device) const { return device < in_use_.size() && in_use_[device]; }
  uint32_t devices_in_use() const { return static_cast<uint32_t>(in_use_.count()); }
  DeviceUuid uuid(DeviceIndex device) const;

  // `tenant` holds the device's token now: `token` cleared (no wake), `grant`
  // raised, then `token` set and its waiters woken. Returns the number.
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
  std::bitset<shm::kBoardDevices> in_use_;
};

}  // namespace gpulimit::server
