// The gate's own threads (connection watcher, drain threads): detached, with
// every signal blocked, so that the program's signals never land on them.
#pragma once

namespace gpulimit::gate {

// Starts body(arg) on such a thread, named `name` (at most 15 characters).
// False when the thread cannot be created.
bool start_background_thread(void* (*body)(void*), void* arg, const char* name) noexcept;

}  // namespace gpulimit::gate
