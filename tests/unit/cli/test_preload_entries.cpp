#include <gtest/gtest.h>

#include "preload/preload_entries.h"

namespace gpulimit::cli {
namespace {

const std::string kLibrary = "/usr/lib/libgpulimit.so";

PreloadEntryTest is(std::string_view wanted) {
  return [wanted](std::string_view entry) { return entry == wanted; };
}

TEST(PreloadEntries, SplitAsTheLoaderSplits) {
  // Arrange
  const std::string text = "/a/liba.so /b/libb.so\t/c/libc.so:/d/libd.so\n\n/e/libe.so";

  // Act
  const std::vector<std::string> sut = preload_entries(text);

  // Assert
  EXPECT_EQ(sut, (std::vector<std::string>{"/a/liba.so", "/b/libb.so", "/c/libc.so", "/d/libd.so",
                                           "/e/libe.so"}));
}

TEST(PreloadEntries, CommentsRunToTheEndOfTheirLine) {
  // Arrange
  const std::string text = "# /x/libx.so\n/a/liba.so # /y/liby.so\n/b/libb.so#/z/libz.so";

  // Act
  const std::vector<std::string> sut = preload_entries(text);

  // Assert
  EXPECT_EQ(sut, (std::vector<std::string>{"/a/liba.so", "/b/libb.so"}));
}

TEST(PreloadEntries, OnlyAbsolutePathsWithoutSeparatorsAreEntries) {
  EXPECT_TRUE(is_preload_entry(kLibrary));
  EXPECT_FALSE(is_preload_entry(""));
  EXPECT_FALSE(is_preload_entry("/"));
  EXPECT_FALSE(is_preload_entry("libgpulimit.so"));
  EXPECT_FALSE(is_preload_entry("/opt/my lib/libgpulimit.so"));
  EXPECT_FALSE(is_preload_entry("/opt/a:b/libgpulimit.so"));
  EXPECT_FALSE(is_preload_entry("/opt/#1/libgpulimit.so"));
  EXPECT_FALSE(is_preload_entry("/opt/x\n/libgpulimit.so"));
}

TEST(PreloadEntries, TheInterposerIsKnownByItsFileName) {
  EXPECT_TRUE(names_interposer(kLibrary));
  EXPECT_TRUE(names_interposer("/usr/local/lib/libgpulimit.so"));
  EXPECT_TRUE(names_interposer("libgpulimit.so"));
  EXPECT_FALSE(names_interposer("/usr/lib/libgpulimit.so.1"));
  EXPECT_FALSE(names_interposer("/usr/lib/xlibgpulimit.so"));
  EXPECT_FALSE(names_interposer("/usr/lib/libgpulimit.so/other.so"));
}

TEST(PreloadEntries, EnablingOnNothingWritesOneLine) {
  // Act
  const std::string sut = with_first_entry("", kLibrary);

  // Assert
  EXPECT_EQ(sut, kLibrary + "\n");
}

TEST(PreloadEntries, EnablingPutsTheLibraryFirstAndKeepsEveryOtherByte) {
  // Arrange
  const std::string text = "# site hooks\n/a/liba.so:/b/libb.so\n/c/libc.so";

  // Act
  const std::string sut = with_first_entry(text, kLibrary);

  // Assert
  EXPECT_EQ(sut, kLibrary + "\n" + text);
  EXPECT_EQ(preload_entries(sut).front(), kLibrary);
}

TEST(PreloadEntries, DisablingUndoesEnabling) {
  for (const std::string text : {"", "/a/liba.so\n", "# hooks\n/a/liba.so /b/libb.so", "\n\n"}) {
    // Arrange
    const std::string enabled = with_first_entry(text, kLibrary);

    // Act
    const std::string sut = without_entries(enabled, is(kLibrary));

    // Assert
    EXPECT_EQ(sut, text) << "from \"" << text << "\"";
  }
}

TEST(PreloadEntries, DisablingRemovesOnlyThePickedEntries) {
  // Arrange
  const std::string text = "/a/liba.so\n" + kLibrary + "\n# " + kLibrary + " kept\n/b/libb.so\n";

  // Act
  const std::string sut = without_entries(text, is(kLibrary));

  // Assert
  EXPECT_EQ(sut, "/a/liba.so\n# " + kLibrary + " kept\n/b/libb.so\n");
}

TEST(PreloadEntries, AnEntrySharingItsLineLeavesTheOthersOnIt) {
  EXPECT_EQ(without_entries("/a/liba.so " + kLibrary + " /b/libb.so\n", is(kLibrary)),
            "/a/liba.so /b/libb.so\n");
  EXPECT_EQ(without_entries(kLibrary + ":/a/liba.so\n", is(kLibrary)), "/a/liba.so\n");
  EXPECT_EQ(without_entries("/a/liba.so:" + kLibrary, is(kLibrary)), "/a/liba.so");
  EXPECT_EQ(without_entries(kLibrary + " # ours\n", is(kLibrary)), "# ours\n");
}

TEST(PreloadEntries, EveryCopyGoes) {
  // Arrange
  const std::string text = kLibrary + "\n/a/liba.so\n" + kLibrary + " " + kLibrary + "\n";

  // Act
  const std::string sut = without_entries(text, is(kLibrary));

  // Assert
  EXPECT_EQ(sut, "/a/liba.so\n");
}

TEST(PreloadEntries, NothingPickedLeavesTheTextAsItWas) {
  // Arrange
  const std::string text = "/a/liba.so \t\n\n# libgpulimit.so\n/b/libb.so";

  // Act
  const std::string sut = without_entries(text, names_interposer);

  // Assert
  EXPECT_EQ(sut, text);
}

}  // namespace
}  // namespace gpulimit::cli
