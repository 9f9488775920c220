#include <gtest/gtest.h>

#include "run/preload_list.h"

namespace gpulimit::cli {
namespace {

const std::string kLibrary = "/opt/gpulimit/lib/libgpulimit.so";

TEST(PreloadList, TheLibraryAloneWhenNothingWasPreloaded) {
  EXPECT_EQ(preload_with(kLibrary, ""), kLibrary);
  EXPECT_EQ(preload_with(kLibrary, " : :"), kLibrary);
}

TEST(PreloadList, TheLibraryFirstThenTheRestInOrder) {
  EXPECT_EQ(preload_with(kLibrary, "/a/liba.so"), kLibrary + ":/a/liba.so");
  // Split as the loader splits: on spaces and colons alike.
  EXPECT_EQ(preload_with(kLibrary, "/a/liba.so /b/libb.so:libc_hook.so"),
            kLibrary + ":/a/liba.so:/b/libb.so:libc_hook.so");
}

TEST(PreloadList, NoSecondCopyOfTheInterposer) {
  EXPECT_EQ(preload_with(kLibrary, "/a/liba.so:" + kLibrary), kLibrary + ":/a/liba.so");
  EXPECT_EQ(preload_with(kLibrary, kLibrary + " " + kLibrary), kLibrary);
  EXPECT_EQ(preload_with(kLibrary, "/usr/lib/libgpulimit.so:/a/liba.so:libgpulimit.so"),
            kLibrary + ":/a/liba.so");
  // Only the file name counts, not a name that contains it.
  EXPECT_EQ(preload_with(kLibrary, "/a/libgpulimit.so.1:/a/xlibgpulimit.so"),
            kLibrary + ":/a/libgpulimit.so.1:/a/xlibgpulimit.so");
}

}  // namespace
}  // namespace gpulimit::cli
