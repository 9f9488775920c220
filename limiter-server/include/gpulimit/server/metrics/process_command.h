// A process's command line as `gpulimit status` and `gpulimit top` show it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace gpulimit::server {

inline constexpr std::size_t kMaxCommandLength = 128;

// /proc/PID/cmdline, its arguments joined by spaces, at most
// kMaxCommandLength bytes; control characters become '?', so the text is one
// line. "" when the process is gone or the file cannot be read (a kernel
// thread, another pid namespace).
std::string process_command(pid_t pid);

// The same from the file's bytes (NUL-separated arguments), for tests.
std::string command_from_cmdline(const std::string& bytes);

}  // namespace gpulimit::server
