#include "gate/enforcement.h"

#include <sys/stat.h>

#include "gpulimit/protocol/channel.h"

namespace gpulimit::gate {
namespace {

bool owned_by_root(const struct stat& status) {
  return status.st_uid == 0;
}

}  // namespace

bool administrator_enforces() noexcept {
  struct stat status {};
  if (lstat(protocol::kSystemDirectory, &status) != 0 || !S_ISDIR(status.st_mode) ||
      !owned_by_root(status) || (status.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return false;
  return lstat(protocol::kEnforcementMarkerPath, &status) == 0 && S_ISREG(status.st_mode) &&
         owned_by_root(status);
}

}  // namespace gpulimit::gate
