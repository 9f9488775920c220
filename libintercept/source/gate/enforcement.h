// Whether the administrator enforces gpulimit on this machine: the system
// gpulimitd serves with a policy (or served with one and died), which it
// says with a root-owned marker (protocol::kEnforcementMarkerPath). Then
// every process joins the system server whatever its environment says, and
// one that server refuses, or cannot serve, gets no CUDA
// (limiter-server/README.md, "Where the administrator enforces").
#pragma once

namespace gpulimit::gate {

// Looks at the marker now: a regular file owned by root, in a directory
// owned by root that nobody else may write to (so that no user can plant
// one, nor remove the system server's).
bool administrator_enforces() noexcept;

}  // namespace gpulimit::gate
