#include "gpulimit/server/daemon/enforcement_marker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace gpulimit::server {

Result<EnforcementMarker> EnforcementMarker::make(std::string path) {
  // A stale marker of a server that died is replaced, not trusted: whatever
  // lies at the path (a link, say) goes, and the new file is our own.
  if (unlink(path.c_str()) != 0 && errno != ENOENT)
    return fail(path + ": cannot replace the enforcement marker: " + std::strerror(errno));
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return fail(path + ": cannot make the enforcement marker: " + std::strerror(errno));
  fchmod(fd, 0644);  // whatever the umask
  close(fd);
  return EnforcementMarker(std::move(path));
}

EnforcementMarker::EnforcementMarker(EnforcementMarker&& other) noexcept
    : path_(std::exchange(other.path_, {})) {}

EnforcementMarker::~EnforcementMarker() {
  if (!path_.empty()) unlink(path_.c_str());
}

}  // namespace gpulimit::server
