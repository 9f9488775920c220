// The system server's word to libgpulimit.so that the administrator
// enforces gpulimit on this machine: protocol::kEnforcementMarkerPath, made
// once the server serves the system socket with a policy, and removed when
// it stops cleanly. A server that dies leaves it, so that processes started
// meanwhile are refused CUDA rather than run without the policy.
#pragma once

#include <string>
#include <utility>

#include "gpulimit/server/result.h"

namespace gpulimit::server {

class EnforcementMarker {
 public:
  // Makes the marker at `path` (a regular file, 0644, replacing a stale one).
  static Result<EnforcementMarker> make(std::string path);
  EnforcementMarker(EnforcementMarker&& other) noexcept;
  EnforcementMarker& operator=(EnforcementMarker&&) = delete;
  EnforcementMarker(const EnforcementMarker&) = delete;
  ~EnforcementMarker();

  // Leaves the file in place when this goes: the server failed rather than
  // stopped, and processes must stay refused until one serves again.
  void leave() noexcept { path_.clear(); }

 private:
  explicit EnforcementMarker(std::string path) : path_(std::move(path)) {}
  std::string path_;  // empty once moved from
};

}  // namespace gpulimit::server
