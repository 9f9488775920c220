// Ids for new tenants.
#pragma once

#include <string>

namespace gpulimit::cli {

// "<uid>-<pid>-<16 hex digits>". The pid is the job's own, since gpulimit
// becomes the job; the random part keeps two jobs apart when a pid is
// reused. False with `error` set when no random bytes can be had.
bool new_tenant_id(std::string& out, std::string& error);

}  // namespace gpulimit::cli
