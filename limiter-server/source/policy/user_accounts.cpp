#include "gpulimit/server/policy/user_accounts.h"

#include <grp.h>
#include <pwd.h>

#include <algorithm>
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

std::string group_name(gid_t gid) {
  std::vector<char> buffer(16384);
  group entry{};
  group* found = nullptr;
  if (getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &found) == 0 && found)
    return found->gr_name;
  return std::to_string(gid);
}

std::vector<std::string> group_names(uid_t uid) {
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || !found) return {};
  std::vector<gid_t> gids(64);
  int count = static_cast<int>(gids.size());
  if (getgrouplist(found->pw_name, found->pw_gid, gids.data(), &count) < 0) {
    gids.resize(static_cast<size_t>(count));
    if (getgrouplist(found->pw_name, found->pw_gid, gids.data(), &count) < 0) return {};
  }
  gids.resize(static_cast<size_t>(count));
  // The primary group first, as getgrouplist need not put it.
  std::stable_partition(gids.begin(), gids.end(), [&](gid_t gid) { return gid == found->pw_gid; });
  std::vector<std::string> names;
  for (const gid_t gid : gids)
    names.push_back(group_name(gid));
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace gpulimit::server
