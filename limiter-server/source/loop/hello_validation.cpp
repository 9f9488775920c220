#include "gpulimit/server/loop/hello_validation.h"

#include <cstring>
#include <optional>
#include <string_view>

#include "gpulimit/options/values.h"

namespace gpulimit::server {
namespace {

// The text of a NUL-padded field, or nullopt when it holds no NUL.
std::optional<std::string_view> terminated(const char* field, std::size_t size) {
  const void* nul = std::memchr(field, '\0', size);
  if (!nul) return std::nullopt;
  return std::string_view(field, static_cast<const char*>(nul) - field);
}

bool has_control_character(std::string_view text) {
  for (const char c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

bool known_priority(protocol::Priority priority) {
  return priority == protocol::Priority::kLow || priority == protocol::Priority::kNormal ||
         priority == protocol::Priority::kHigh;
}

}  // namespace

std::string printable(std::string_view text, std::size_t limit) {
  std::string shown(text.substr(0, limit));
  for (char& c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (text.size() > limit) shown += "...";
  return shown;
}

std::string other_version_refusal(uint16_t client_version) {
  return "gpulimitd speaks protocol version " + std::to_string(protocol::kVersion) +
         " and this client version " + std::to_string(client_version) +
         "; use a libgpulimit.so and gpulimitd of the same release";
}

Result<TenantRequest> validate_hello(const protocol::Hello& hello, pid_t peer_pid) {
  if (hello.claimed_pid != peer_pid)
    return fail("the Hello claims pid " + std::to_string(hello.claimed_pid) +
                " but comes from pid " + std::to_string(peer_pid) +
                " (a process must introduce itself on its own connection)");

  TenantRequest request;
  const auto tenant = terminated(hello.tenant, sizeof hello.tenant);
  if (!tenant) return fail("the tenant id is not NUL-terminated");
  std::string reason;
  if (!options::parse_tenant_id(*tenant, reason))
    return fail("tenant id '" + printable(*tenant) + "': " + reason);
  request.tenant = std::string(*tenant);

  if (hello.sm_percent > 100)
    return fail("sm " + std::to_string(hello.sm_percent) + " % is not 0 (no cap) to 100");
  if (hello.weight < 1 || hello.weight > protocol::kMaxWeight)
    return fail("weight " + std::to_string(hello.weight) + " is not 1 to " +
                std::to_string(protocol::kMaxWeight));
  if (!known_priority(hello.priority))
    return fail("priority " + std::to_string(static_cast<int32_t>(hello.priority)) +
                " is not low (-1), normal (0) or high (1)");
  request.share = ComputeShare{hello.sm_percent, hello.weight, hello.priority};

  const auto ledger_dir = terminated(hello.ledger_dir, sizeof hello.ledger_dir);
  if (!ledger_dir) return fail("the ledger directory is not NUL-terminated");
  if (!ledger_dir->starts_with('/'))
    return fail("the ledger directory '" + printable(*ledger_dir) + "' is not an absolute path");
  if (has_control_character(*ledger_dir))
    return fail("the ledger directory '" + printable(*ledger_dir) + "' holds a control character");
  request.ledger_dir = std::string(*ledger_dir);

  if (hello.device_count > shm::kBoardDevices)
    return fail("the Hello names " + std::to_string(hello.device_count) + " GPUs; at most " +
                std::to_string(shm::kBoardDevices) + " are served");
  for (uint32_t i = 0; i < hello.device_count; ++i) {
    DeviceUuid uuid;
    std::memcpy(uuid.data(), hello.uuids[i], uuid.size());
    request.uuids.push_back(uuid);
  }

  if (hello.leader_pid < 0 || (hello.leader_pid == 0 && hello.leader_start_ticks != 0) ||
      (hello.leader_pid > 0 && hello.leader_start_ticks == 0))
    return fail("the job's leader (pid " + std::to_string(hello.leader_pid) + ", start " +
                std::to_string(hello.leader_start_ticks) +
                ") is not a pid with its start, nor none");
  request.leader = protocol::JobLeader{hello.leader_pid, hello.leader_start_ticks};
  return request;
}

}  // namespace gpulimit::server
