// Tenants and their processes. A tenant is keyed by (uid, tenant id): the
// processes of one user that name the same id share its token and limits.
// Its number never comes back while the server runs, so a token word never
// names a tenant that left and one that came after.
#pragma once

#include <sys/types.h>

#include <bitset>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpulimit/server/scheduling/scheduling_types.h"
#include "gpulimit/shm/board.h"

namespace gpulimit::server {

// The server's name for a connection; never reused.
using ConnectionId = uint64_t;

struct TenantRecord {
  TenantNumber number = kNoTenant;
  uid_t uid = 0;
  gid_t gid = 0;  // of the process that created the tenant
  std::string id;
  std::string user;     // uid's login name, or the uid as text
  std::string group;    // gid's name, or the gid as text
  std::string command;  // its first process's command line (process_command.h)
  ComputeShare share;   // granted to the tenant's first process; kept for all
  ShareBranch branch;   // its place in the fair-share tree, likewise
  std::set<ConnectionId> processes;
};

struct ProcessRecord {
  ConnectionId connection = 0;
  pid_t pid = 0;
  TenantNumber tenant = kNoTenant;
  std::vector<DeviceIndex> devices;       // board devices the process sees, sorted
  std::string ledger_path;                // its tenant's ledger file, as it named the directory
  std::bitset<shm::kBoardDevices> wants;  // sent Want since its tenant's last grant there

  bool sees(DeviceIndex device) const;
};

struct JoiningProcess {
  ConnectionId connection = 0;
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string tenant_id;
  std::string user;
  std::string group;
  std::string command;  // kept only when the process creates its tenant
  ComputeShare share;
  ShareBranch branch;
  std::vector<DeviceIndex> devices;
  std::string ledger_path;
};

struct JoinOutcome {
  TenantNumber tenant = kNoTenant;
  bool new_tenant = false;
  // The process asked for another share than its tenant has; it gets the
  // tenant's (the first process's).
  bool share_differs = false;
};

struct LeaveOutcome {
  TenantNumber tenant = kNoTenant;
  std::string tenant_id;
  ProcessRecord process;
  // Devices no process of the tenant sees any more.
  std::vector<DeviceIndex> devices_left;
  // Devices the tenant still sees but no longer wants: the leaver was the
  // only process of the tenant that asked for them.
  std::vector<DeviceIndex> wants_dropped;
  bool tenant_gone = false;
};

class TenantRegistry {
 public:
  // Joins the process to its tenant, creating the tenant if it is the
  // first. nullopt when tenant numbers ran out (after 2^31 - 1 tenants).
  std::optional<JoinOutcome> join(const JoiningProcess& process);
  std::optional<LeaveOutcome> leave(ConnectionId connection);
  // A policy reload changed the tenant's share.
  void set_share(TenantNumber tenant, const ComputeShare& share);
  // A policy reload changed the shares of the tenant's group or user.
  void set_branch(TenantNumber tenant, const ShareBranch& branch);

  // The number of the tenant (uid, id), if it has processes.
  std::optional<TenantNumber> find(uid_t uid, const std::string& id) const;
  ProcessRecord* process(ConnectionId connection);
  const ProcessRecord* process(ConnectionId connection) const;
  const TenantRecord* tenant(TenantNumber tenant) const;
  const std::map<TenantNumber, TenantRecord>& tenants() const { return tenants_; }
  std::size_t process_count() const { return processes_.size(); }

  // The tenant's processes that see `device`, and so can acknowledge there.
  std::vector<ConnectionId> processes_seeing(TenantNumber tenant, DeviceIndex device) const;
  // Whether some process of any tenant sees `device`.
  bool device_in_use(DeviceIndex device) const;
  // The board devices some process of the tenant sees, sorted.
  std::vector<DeviceIndex> devices_of(TenantNumber tenant) const;
  // The tenant was granted `device`: its processes' wants there are met.
  void clear_wants(TenantNumber tenant, DeviceIndex device);
  // Some process of the tenant sent Want for `device` since its last grant there.
  bool wants(TenantNumber tenant, DeviceIndex device) const;

 private:
  TenantNumber next_number_ = 1;
  std::map<std::pair<uid_t, std::string>, TenantNumber> by_key_;
  std::map<TenantNumber, TenantRecord> tenants_;
  std::unordered_map<ConnectionId, ProcessRecord> processes_;
};

}  // namespace gpulimit::server
