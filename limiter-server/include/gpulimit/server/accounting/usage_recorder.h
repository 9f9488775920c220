// What gpulimitd records of its tenants' use, into the usage database
// (gpulimit/usage/usage_database.h). It is fed the status report the server
// builds anyway, at every --usage-interval and just before a tenant's last
// process leaves, and keeps per tenant and device: the token held (the
// scheduler's count), the memory its ledger counts (peak as sampled, and its
// integral over time between samples), the refusals at its cap. What changed
// is saved in one transaction. Pure apart from the database: time comes in.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpulimit/protocol/status.h"
#include "gpulimit/server/scheduling/scheduling_types.h"
#include "gpulimit/usage/usage_database.h"

namespace gpulimit::server {

// Wall-clock time, ns since the epoch: what the usage database records.
int64_t wall_clock_ns();

class UsageRecorder {
 public:
  // The names of `uid`'s groups, primary first.
  using GroupsOf = std::function<std::vector<std::string>(uint32_t uid)>;

  // `run` names this server run in the database (its start, ns since the
  // epoch).
  UsageRecorder(std::unique_ptr<usage::UsageDatabase> database, int64_t run, GroupsOf groups_of);

  // Samples every tenant of `report` at monotonic `now` and wall `wall_ns`.
  void observe(const protocol::status::Report& report, TimeNs now, int64_t wall_ns);
  // Tenant `number` is gone (`how`: usage::kEnded*): its record is closed.
  void ended(uint32_t number, const char* how, int64_t wall_ns);
  // Closes every record still open.
  void end_all(const char* how, int64_t wall_ns);
  // Writes what changed since the last save. False, with `error`, when the
  // database refused: what changed is kept for the next save.
  bool save(std::string& error);

  // Since this server started, per user: GPU seconds and GiB-hours of its
  // tenants, running and ended, for the metrics.
  struct Totals {
    double gpu_seconds = 0;
    double gib_hours = 0;
  };
  std::map<std::string, Totals> user_totals() const;

  const std::string& path() const { return database_->path(); }

 private:
  struct Tenant {
    usage::TenantUsage record;
    TimeNs sampled = 0;                      // monotonic, last observe()
    std::map<std::string, uint64_t> memory;  // per uuid, bytes at the last sample
    bool dirty = true;
  };
  static Totals totals_of(const usage::TenantUsage& record);

  std::unique_ptr<usage::UsageDatabase> database_;
  int64_t run_;
  GroupsOf groups_of_;
  std::map<uint32_t, Tenant> running_;
  std::vector<usage::TenantUsage> ended_unsaved_;
  std::map<std::string, Totals> ended_totals_;
};

}  // namespace gpulimit::server
