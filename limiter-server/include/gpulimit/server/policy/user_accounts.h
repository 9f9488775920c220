// Users by name, as the status report, the metrics and the watcher's
// warnings show them.
#pragma once

#include <sys/types.h>

#include <string>

namespace gpulimit::server {

// The name of `uid`'s account, or the uid in decimal for one without an
// entry in the passwd database.
std::string user_name(uid_t uid);

}  // namespace gpulimit::server
