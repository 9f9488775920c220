// `gpulimit top`'s picture of a status snapshot, as plain text lines no
// wider than the terminal: pure functions, so that every width and sort
// order is tested without a terminal or a server.
//
// A frame: a title line, a line of keys, the column headings, then per
// device a line naming it, a line per group or user memory_total there,
// and a row per tenant that uses it (sorted), and
// the tenants that use no device yet last. Columns that do not fit are
// shortened, then dropped (tenant id, pids, wait, bar, in that order),
// never wrapped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/protocol/status.h"

namespace gpulimit::cli {

enum class TopSortKey { kMemory, kShare, kWait, kUser, kOom };

// The key a keypress picks ('m', 's', 'w', 'u', 'o', either case).
std::optional<TopSortKey> sort_key_for(char key);
std::string_view sort_key_name(TopSortKey key);

// One tenant on one device: a row of the table.
struct TopRow {
  std::string tenant;
  std::string user;
  std::string command;  // empty when the server does not say
  std::vector<int64_t> pids;
  std::optional<uint64_t> memory_used;
  std::optional<uint64_t> memory_cap;
  std::optional<double> share_achieved;  // none for a tenant on no device
  std::optional<double> share_target;
  std::optional<uint64_t> wait_ns;
  std::optional<uint64_t> oom_denials;
  bool orphan = false;  // its job's main process has exited (shown before the command)
};

// Biggest first for memory, share, wait and OOM denials (unknown last),
// users alphabetically; ties by tenant id, so the order never flickers.
void sort_rows(std::vector<TopRow>& rows, TopSortKey key);

// `text` with every byte that is not printable ASCII shown as '?' (one per
// UTF-8 character), so that a column's width is its length in bytes.
std::string printable(std::string_view text);

// `text` cut to `width`; a cut text ends in '+', as top marks it.
std::string fit(std::string_view text, std::size_t width);

// "5001,5002", or as many as fit followed by "+N" for the N left out.
std::string format_pids(const std::vector<int64_t>& pids, std::size_t width);

// Bytes in one letter of binary unit: "512M", "3.2G", "1023B".
std::string compact_bytes(uint64_t bytes);

// "used/cap", "-" for what is not known: "3.2G/10G", "512M/-".
std::string memory_text(std::optional<uint64_t> used, std::optional<uint64_t> cap);

// A bar of `width` cells (brackets included) filled with '#' by used/cap,
// '.' for the rest: some use shows at least one '#', a full bar means the
// cap is reached, all '!' means over it. Without a cap it says "no cap"
// (or "none", or "-", whichever fits), without a figure for what is used,
// "?".
std::string memory_bar(std::optional<uint64_t> used, std::optional<uint64_t> cap,
                       std::size_t width);

// "0s", "850ms", "12.3s", "5m03s", "2h05m", "3d04h"; "-" when unknown.
std::string format_wait(std::optional<uint64_t> ns);

// "30%/30%": achieved over the server's window, then target.
std::string share_text(std::optional<double> achieved, std::optional<double> target);

// What a frame shows: the snapshot, or why there is none.
struct TopFrameInput {
  std::optional<protocol::status::Report> snapshot;
  std::string problem;  // when there is no snapshot: one line
  std::string clock;    // "HH:MM:SS", shown in the title
  double interval_s = 1;
  TopSortKey sort = TopSortKey::kMemory;
};

struct TopFrame {
  std::vector<std::string> lines;  // each at most `width` long, no newline
  std::size_t heading_line = 0;    // the column headings (highlighted on a terminal)
  bool has_heading = false;
};

TopFrame render_top_frame(const TopFrameInput& input, std::size_t width);

}  // namespace gpulimit::cli
