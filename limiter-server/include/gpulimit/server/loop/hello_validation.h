// What a Hello asks for, checked field by field before the server trusts
// any of it. Each refusal is one line that tells the user what to fix.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/protocol/job_leader.h"
#include "gpulimit/protocol/messages.h"
#include "gpulimit/server/result.h"
#include "gpulimit/server/scheduling/scheduling_types.h"

namespace gpulimit::server {

using DeviceUuid = std::array<unsigned char, 16>;

struct TenantRequest {
  std::string tenant;             // the tenant id, [A-Za-z0-9._-]{1,64}
  ComputeShare share;             // as asked, before policy
  std::string ledger_dir;         // absolute
  std::vector<DeviceUuid> uuids;  // in the Hello's order, duplicates kept
  protocol::JobLeader leader;     // pid 0: none named
};

// Checks `hello`, sent from a process the kernel says is `peer_pid`.
Result<TenantRequest> validate_hello(const protocol::Hello& hello, pid_t peer_pid);

// The refusal for a client of another protocol version.
std::string other_version_refusal(uint16_t client_version);

// `text` made fit for one log line: control characters become '?', and it
// is cut to `limit` characters.
std::string printable(std::string_view text, std::size_t limit = 80);

}  // namespace gpulimit::server
