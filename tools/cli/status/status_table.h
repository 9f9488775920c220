// `gpulimit status` for people: gpulimitd's status (the status schema,
// gpulimit/protocol/status.h) as tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpulimit::cli {

// The server's line, then a table of devices (who holds each, how many
// wait), then one of tenants with a row per device they use: memory used
// and capped in binary units, target and achieved share of GPU time in
// percent; then the processes using a GPU without gpulimit, if the server
// saw any. False with `error` set to one line when `json` is not of the
// schema.
bool render_status_table(std::string_view json, std::string& out, std::string& error);

// 1536 MiB is "1.5 GiB": the largest binary unit that leaves at least 1,
// to one decimal, without a trailing ".0"; below 1 KiB, "N B".
std::string format_bytes(uint64_t bytes);

}  // namespace gpulimit::cli
