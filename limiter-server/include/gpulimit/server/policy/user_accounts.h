// Users by name, as the status report, the metrics and the watcher's
// warnings show them.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpulimit::server {

// The name of `uid`'s account, or the uid in decimal for one without an
// entry in the passwd database.
std::string user_name(uid_t uid);

// The name of the group `gid`, or the gid in decimal for one without an
// entry in the group database.
std::string group_name(gid_t gid);

// The names of the groups of `uid`'s account (its primary group first, a
// group without an entry in the group database by its gid); none for a uid
// without an account.
std::vector<std::string> group_names(uid_t uid);

}  // namespace gpulimit::server
