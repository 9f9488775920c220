// A job's main process: the one `gpulimit` exec'd the command as. The CLI
// names it to the job in GPULIMIT_JOB_LEADER=PID:START (START: field 22 of
// /proc/PID/stat, clock ticks since boot, so that a pid taken again by
// another process is told apart); every process of the job inherits the
// variable, and each says it in Hello. gpulimitd watches the tenant's
// leader: a tenant whose leader exited while processes of it still use the
// GPU is an orphan (limiter-server/source/loop/orphans.cpp).
//
// What a process claims here is believed only about its own tenant: a
// false leader can make its own tenant an orphan early, never another's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpulimit::protocol {

inline constexpr const char* kJobLeaderVariable = "GPULIMIT_JOB_LEADER";

struct JobLeader {
  int32_t pid = 0;  // 0: none named
  uint64_t start_ticks = 0;

  friend bool operator==(const JobLeader&, const JobLeader&) = default;
};

// "PID:START" into `out` (NUL-terminated); false when it does not fit.
bool format_job_leader(const JobLeader& leader, char* out, std::size_t size) noexcept;

// The variable's value; false for anything but two decimal numbers, a
// positive pid and a nonzero start, joined by ':'.
bool parse_job_leader(std::string_view text, JobLeader& out) noexcept;

// The leader `envp` (a NULL-terminated NAME=value block) names; none when
// the variable is unset or not of the form above.
JobLeader job_leader_in(char* const* envp) noexcept;

// Process `pid` as a leader, from /proc/PID/stat; false when it has gone (or
// its stat cannot be read).
bool read_job_leader(int32_t pid, JobLeader& out) noexcept;

// Field 22 of /proc/PID/stat (starttime, in clock ticks since boot); 0
// when `stat` holds none. Counts fields from the last ')', which ends the
// command whatever it holds.
uint64_t stat_start_ticks(std::string_view stat) noexcept;

}  // namespace gpulimit::protocol
