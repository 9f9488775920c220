#include "gate/enforcement.h"

#include <sys/stat.h>

#include <cstring>
#include <string>

#include "gpulimit/protocol/channel.h"

namespace gpulimit::gate {
namespace {

bool owned_by_root(const struct stat& status) {
  return status.st_uid == 0;
}

}  // namespace

bool administrator_enforces() noexcept {
  const char* marker = protocol::kEnforcementMarkerPath;
  const char* slash = std::strrchr(marker, '/');
  char directory[64] = {};
  if (!slash || static_cast<size_t>(slash - marker) >= sizeof(directory)) return false;
  std::memcpy(directory, marker, static_cast<size_t>(slash - marker));
  struct stat status {};
  if (lstat(directory, &status) != 0 || !S_ISDIR(status.st_mode) || !owned_by_root(status) ||
      (status.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return false;
  return lstat(marker, &status) == 0 && S_ISREG(status.st_mode) && owned_by_root(status);
}

}  // namespace gpulimit::gate
