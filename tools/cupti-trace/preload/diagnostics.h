// One-line messages on stderr from inside a traced process: formatted into a
// fixed buffer and written with one write(), so that they never allocate and
// never interleave with another process's messages.
#pragma once

#include <cupti_result.h>

namespace gpulimit::cupti_trace {

// "gpulimit-cupti-trace: <message>\n"
[[gnu::format(printf, 1, 2)]] void say(const char* format, ...);

// Says which CUPTI call failed and why; returns whether `result` is success.
bool cupti_ok(CUptiResult result, const char* call);

}  // namespace gpulimit::cupti_trace
