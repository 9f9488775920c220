// What `gpulimit top` writes to a terminal: plain ANSI (VT100) sequences,
// which every terminal emulator and ssh client understands, so no terminfo
// database is needed. Each row is addressed on its own and cleared, so a
// frame never relies on line wrapping and a short terminal cuts it cleanly.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "top/top_layout.h"

namespace gpulimit::cli {

// The alternate screen (the shell's screen comes back on leaving), the
// cursor hidden; and their undoing.
inline constexpr std::string_view kEnterScreen = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J";
inline constexpr std::string_view kLeaveScreen = "\x1b[?25h\x1b[?1049l";

// The bytes that show `frame` on a terminal of `width` x `height`: each
// line at its row, cut to `width`, the headings in reverse video, the rows
// below the frame cleared. A frame taller than the terminal ends in a line
// saying how many lines are not shown.
std::string screen_update(const TopFrame& frame, std::size_t width, std::size_t height);

}  // namespace gpulimit::cli
