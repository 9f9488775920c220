// What gpulimit top writes to a terminal for a frame: each row addressed
// and cleared, cut to the width and height, never relying on wrapping.
#include <gtest/gtest.h>

#include <string>

#include "top/top_screen.h"

namespace gpulimit::cli {
namespace {

TopFrame frame_of(std::vector<std::string> lines, bool heading_at_1 = false) {
  TopFrame frame;
  frame.lines = std::move(lines);
  frame.has_heading = heading_at_1;
  frame.heading_line = 1;
  return frame;
}

TEST(TopScreen, EachLineAtItsRowAndTheRestCleared) {
  const TopFrame sut = frame_of({"one", "two"});

  const std::string bytes = screen_update(sut, 10, 5);

  EXPECT_EQ(bytes, "\x1b[1;1H\x1b[2Kone\x1b[2;1H\x1b[2Ktwo\x1b[3;1H\x1b[J");
}

TEST(TopScreen, TheHeadingIsReverseVideoAcrossTheWidth) {
  const TopFrame sut = frame_of({"title", "USER MEM"}, true);

  const std::string bytes = screen_update(sut, 10, 2);

  EXPECT_EQ(bytes, "\x1b[1;1H\x1b[2Ktitle\x1b[2;1H\x1b[2K\x1b[7mUSER MEM  \x1b[m");
}

TEST(TopScreen, LinesAreCutToTheWidth) {
  const TopFrame sut = frame_of({"abcdefghij"});

  EXPECT_EQ(screen_update(sut, 4, 1), "\x1b[1;1H\x1b[2Kabc+");
}

TEST(TopScreen, ATallFrameSaysHowManyLinesAreNotShown) {
  const TopFrame sut = frame_of({"a", "b", "c", "d", "e"});

  const std::string bytes = screen_update(sut, 20, 3);

  EXPECT_EQ(bytes, "\x1b[1;1H\x1b[2Ka\x1b[2;1H\x1b[2Kb\x1b[3;1H\x1b[2K(3 more lines)");
}

TEST(TopScreen, EnteringAndLeavingUndoEachOther) {
  EXPECT_NE(kEnterScreen.find("\x1b[?1049h"), std::string_view::npos);
  EXPECT_NE(kLeaveScreen.find("\x1b[?1049l"), std::string_view::npos);
  EXPECT_NE(kEnterScreen.find("\x1b[?25l"), std::string_view::npos);
  EXPECT_NE(kLeaveScreen.find("\x1b[?25h"), std::string_view::npos);
}

}  // namespace
}  // namespace gpulimit::cli
