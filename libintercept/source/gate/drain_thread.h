// The drain threads of a session: one per device the server time-slices for
// this process. Each sleeps on its device's token word and answers the
// server:
//   - token_revoked(me): waits until no thread of the process is between the
//     gate check and the driver (launching_threads.h), synchronises every
//     context the process launched into on the device, then sends Ack with
//     the grant being revoked;
//   - token_held(me) while other tenants wait: when no thread launched
//     anything for an idle window (a quarter of the board's quantum, at
//     least 1 ms), sends Idle, once per grant. Only in this state does the
//     thread wake on a timer; otherwise it sleeps until the token changes.
// One thread per device, because a futex wait watches one word; the server
// needs an Ack from every process of the tenant that sees the device, so
// each is watched from the attach on.
#pragma once

namespace gpulimit::gate {

class GateSession;

// Starts them; they end when the session closes. False when a thread cannot
// be created (those started end once the caller closes the session).
bool start_drain_threads(GateSession& session) noexcept;

}  // namespace gpulimit::gate
