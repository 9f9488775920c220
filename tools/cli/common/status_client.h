// `gpulimit status` on the wire: one StatusRequest, one StatusReply.
#pragma once

#include <chrono>
#include <string>

namespace gpulimit::cli {

// How long gpulimit waits for the reply: a server that takes longer is stuck.
inline constexpr std::chrono::seconds kStatusReplyTimeout{5};

// Asks the gpulimitd at `socket` for its status, waiting at most `timeout`
// for the reply. True with `json` set to the body of its StatusReply; false
// with `error` set to one line.
bool request_status(const std::string& socket, std::string& json, std::string& error,
                    std::chrono::seconds timeout = kStatusReplyTimeout);

}  // namespace gpulimit::cli
