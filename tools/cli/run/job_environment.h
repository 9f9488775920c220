// The environment a job starts in.
#pragma once

#include <string>
#include <vector>

#include "gpulimit/options/limits.h"
#include "gpulimit/protocol/job_leader.h"

namespace gpulimit::cli {

// `base` (a NULL-terminated NAME=value block) with gpulimit's variables
// written from `limits` in their normalised spelling (earlier values of
// them dropped, HAMi's names kept), GPULIMIT_JOB_LEADER naming `leader`
// (dropped when its pid is 0), and LD_PRELOAD with `library` first (see
// preload_with). False with `error` set only when memory runs out.
bool job_environment(char* const* base, const options::Limits& limits,
                     const protocol::JobLeader& leader, const std::string& library,
                     std::vector<std::string>& out, std::string& error);

}  // namespace gpulimit::cli
