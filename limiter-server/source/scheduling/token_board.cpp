#include "gpulimit/server/scheduling/token_board.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "gpulimit/shm/futex.h"

namespace gpulimit::server {

Result<std::unique_ptr<TokenBoard>> TokenBoard::create(uint32_t quantum_us) {
  std::string error;
  std::unique_ptr<shm::BoardMapping> mapping = shm::BoardMapping::create(quantum_us, error);
  if (!mapping) return fail(error);
  const int read_only_fd = mapping->read_only_descriptor();
  if (read_only_fd < 0)
    return fail(std::string("cannot open the board read-only for clients: ") +
                std::strerror(errno));
  return std::unique_ptr<TokenBoard>(new TokenBoard(std::move(mapping), read_only_fd));
}

TokenBoard::~TokenBoard() {
  ::close(read_only_fd_);
}

Result<std::vector<DeviceIndex>> TokenBoard::publish(const std::vector<DeviceUuid>& uuids) {
  shm::BoardLayout& board = *mapping_->writable();
  const uint32_t count = board.device_count.load(std::memory_order_relaxed);
  const auto published_at = [&](const DeviceUuid& uuid) -> std::optional<DeviceIndex> {
    for (uint32_t d = 0; d < count; ++d)
      if (in_use_[d] && std::memcmp(board.devices[d].uuid, uuid.data(), uuid.size()) == 0) return d;
    return std::nullopt;
  };
  // First the slots each new device would take, without writing any.
  std::vector<DeviceIndex> indices;
  std::bitset<shm::kBoardDevices> taken = in_use_;
  for (std::size_t i = 0; i < uuids.size(); ++i) {
    if (const std::optional<DeviceIndex> published = published_at(uuids[i])) {
      indices.push_back(*published);
      continue;
    }
    // Named twice in this Hello: the slot chosen for its first mention.
    const auto earlier =
        std::find(uuids.begin(), uuids.begin() + static_cast<std::ptrdiff_t>(i), uuids[i]);
    if (earlier != uuids.begin() + static_cast<std::ptrdiff_t>(i)) {
      indices.push_back(indices[static_cast<std::size_t>(earlier - uuids.begin())]);
      continue;
    }
    DeviceIndex free = 0;
    while (free < shm::kBoardDevices && taken[free])
      ++free;
    if (free == shm::kBoardDevices)
      return fail("gpulimitd serves " + std::to_string(shm::kBoardDevices) +
                  " GPUs at most, and that many are in use");
    taken.set(free);
    indices.push_back(free);
  }
  uint32_t new_count = count;
  for (std::size_t i = 0; i < uuids.size(); ++i) {
    const DeviceIndex d = indices[i];
    if (in_use_[d]) continue;
    in_use_.set(d);
    std::memcpy(board.devices[d].uuid, uuids[i].data(), uuids[i].size());
    new_count = std::max(new_count, d + 1);
  }
  // The entries are complete before the count that publishes them (and
  // before the Welcome that names them).
  board.device_count.store(new_count, std::memory_order_release);
  return indices;
}

void TokenBoard::withdraw(DeviceIndex device) {
  if (!in_use(device)) return;
  shm::BoardDevice& entry = device_at(device);
  std::memset(entry.uuid, 0, sizeof entry.uuid);
  entry.waiting.store(0, std::memory_order_relaxed);
  clear(device);
  in_use_.reset(device);
}

uint32_t TokenBoard::device_count() const {
  return mapping_->layout().device_count.load(std::memory_order_relaxed);
}

DeviceUuid TokenBoard::uuid(DeviceIndex device) const {
  DeviceUuid uuid{};
  std::memcpy(uuid.data(), mapping_->layout().devices[device].uuid, uuid.size());
  return uuid;
}

shm::BoardDevice& TokenBoard::device_at(DeviceIndex device) {
  return mapping_->writable()->devices[device];
}

void TokenBoard::set_token(DeviceIndex device, uint32_t token) {
  shm::BoardDevice& entry = device_at(device);
  entry.token.store(token, std::memory_order_release);
  shm::futex_wake_all(entry.token);
}

uint32_t TokenBoard::grant(DeviceIndex device, TenantNumber tenant) {
  shm::BoardDevice& entry = device_at(device);
  // The token cleared before the number is raised (board.h): a drain thread
  // that read the last holder's token_revoked(t) and then this number finds
  // the token changed when it reads it again. No wake: the store below wakes.
  entry.token.store(0, std::memory_order_relaxed);
  // `grant` before `token` (board.h): a process that sees token_held(t) reads
  // this grant's number, or a later one.
  const uint32_t number = entry.grant.fetch_add(1, std::memory_order_release) + 1;
  set_token(device, shm::token_held(tenant));
  return number;
}

void TokenBoard::revoke(DeviceIndex device, TenantNumber tenant) {
  set_token(device, shm::token_revoked(tenant));
}

void TokenBoard::clear(DeviceIndex device) {
  set_token(device, 0);
}

uint32_t TokenBoard::grant_number(DeviceIndex device) const {
  return mapping_->layout().devices[device].grant.load(std::memory_order_relaxed);
}

void TokenBoard::set_waiting(DeviceIndex device, uint32_t waiting) {
  shm::BoardDevice& entry = device_at(device);
  const uint32_t before = entry.waiting.load(std::memory_order_relaxed);
  if (before == waiting) return;
  entry.waiting.store(waiting, std::memory_order_release);
  // The holder's drain threads sleep on the token word with no timeout while
  // nobody waits; from now on they should watch for their process going
  // idle, so wake them.
  if (before == 0) shm::futex_wake_all(entry.token);
}

void TokenBoard::clear_all() {
  for (DeviceIndex d = 0; d < device_count(); ++d) {
    device_at(d).waiting.store(0, std::memory_order_relaxed);
    clear(d);
  }
}

}  // namespace gpulimit::server
