// Fields the watcher reads from a process's /proc files, taken from their
// text. What the process itself can write there is its command (comm, up
// to 15 bytes of anything but NUL, set with prctl(PR_SET_NAME)): in
// /proc/PID/stat it stands in parentheses as it is, spaces and ')'
// included; /proc/PID/status escapes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "gpulimit/protocol/job_leader.h"

namespace gpulimit::server {

// Field 22 of /proc/PID/stat, as a job's leader is told apart by.
using protocol::stat_start_ticks;

// The real id of the `key` line of /proc/PID/status ("Uid:" or "Gid:", the
// first of the ids on the line); nullopt when there is no such line.
std::optional<unsigned> status_real_id(std::string_view status, std::string_view key);

}  // namespace gpulimit::server
