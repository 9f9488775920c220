// How a process joins gpulimitd and leaves it:
//   - at cuInit, with GPULIMIT_SOCKET set: Hello → Welcome (a session: the
//     board, the drain threads) or Refused (one line, ungated for good); a
//     server that cannot be reached leaves the process ungated until it is;
//   - when the server goes (the connection watcher sees the socket close):
//     ungated, every waiting launch proceeds, and the watcher attaches again
//     when a server is back (a new session, a new board);
//   - in a forked child: the parent's connection and threads are not the
//     child's; the child attaches as a process of its own at its next CUDA
//     use.
// Memory caps do not depend on any of this (tenant.h).
#pragma once

#include <cstdint>
#include <string>

#include "gpulimit/options/limits.h"
#include "gpulimit/shm/lease_page.h"

namespace gpulimit::gate {

class GateSession;

// The session the process is attached under; null while ungated.
GateSession* current_session() noexcept;

// Where gpulimitd's socket lies: its directory and its name there (set
// before any watcher starts).
const std::string& server_socket_directory() noexcept;
const std::string& server_socket_name() noexcept;

// The connection watcher saw `session`'s server go.
void server_gone(GateSession& session) noexcept;

// The connection watcher, while ungated: tries to attach again.
enum class Reattach {
  kAttached,
  kRefused,      // for good
  kUnreachable,  // nobody listens: wait for the socket to appear
  kNoAnswer,     // a server listens but did not answer: try again later
};
Reattach attach_again() noexcept;

// Called by Tenant::attach before it caps the devices: with a server in
// `limits`, attaches (the first time) and fills caps[0..count) with the
// memory caps the server granted, by CUDA ordinal (0: none). False when no
// server granted any (none configured, unreachable, refused).
bool join_for_memory(const options::Limits& limits, uint64_t* caps, int count) noexcept;

// The lease (memory totals, shm/lease_page.h) that reservations on CUDA
// device `ordinal` are held to: the current session's, or while ungated the
// last session's (its server's last promise stands until another server
// says otherwise). `lease` is null when none binds; then
// `session` may be null too.
struct LeaseView {
  GateSession* session = nullptr;
  const shm::LeaseDevice* lease = nullptr;
};
LeaseView lease_for(int ordinal) noexcept;

// True once the first attach of a process under the administrator's
// enforcement (enforcement.h) was refused or found no server: the process
// must get no CUDA. The gate has said so in one line.
bool refused_under_enforcement() noexcept;

// The launch slow path of a forked child that has not attached yet; returns
// at once when another thread is attaching it.
void attach_in_forked_child() noexcept;

}  // namespace gpulimit::gate
