// The connection watcher: one thread per gated process that notices the
// server going and coming back.
//   - attached: poll(2) on the connection; a hang-up or a close means the
//     server is gone (gate_attachment.h: the process turns ungated);
//   - ungated: inotify on the socket's directory; when the socket (re)appears,
//     attach again (a new Hello, a new board). A server that listens but does
//     not answer is tried again after 1 s, then less often (at most every
//     30 s).
// It ends when the server refuses the process, or when the directory cannot
// be watched (the process then stays ungated).
#pragma once

namespace gpulimit::gate {

// Starts the watcher unless it runs. False when its thread cannot be created.
bool ensure_connection_watcher() noexcept;

// In a forked child: the parent's watcher is not the child's. Closes the
// descriptor it inherited. Async-signal-safe.
void forget_connection_watcher_after_fork() noexcept;

}  // namespace gpulimit::gate
