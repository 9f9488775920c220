#include "top/top_screen.h"

#include <algorithm>

namespace gpulimit::cli {
namespace {

std::string move_to_row(std::size_t row) {
  return "\x1b[" + std::to_string(row + 1) + ";1H";
}

}  // namespace

std::string screen_update(const TopFrame& frame, std::size_t width, std::size_t height) {
  std::string out;
  const std::size_t total = frame.lines.size();
  const std::size_t rows = std::min(total, height);
  for (std::size_t row = 0; row < rows; ++row) {
    out += move_to_row(row) + "\x1b[2K";
    if (row + 1 == rows && rows < total) {
      out += fit("(" + std::to_string(total - rows + 1) + " more lines)", width);
    } else if (frame.has_heading && row == frame.heading_line) {
      const std::string text = fit(frame.lines[row], width);
      out += "\x1b[7m" + text + std::string(width - text.size(), ' ') + "\x1b[m";
    } else {
      out += fit(frame.lines[row], width);
    }
  }
  if (rows < height) out += move_to_row(rows) + "\x1b[J";
  return out;
}

}  // namespace gpulimit::cli
