#include "gpulimit/server/policy/user_accounts.h"

#include <pwd.h>

#include <vector>

namespace gpulimit::server {

std::string user_name(uid_t uid) {
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found)
    return found->pw_name;
  return std::to_string(uid);
}

}  // namespace gpulimit::server
