#include <gtest/gtest.h>

#include "gpulimit/byte_size.h"

namespace gpulimit {
namespace {

TEST(ByteSize, PlainBytesAndBinarySuffixes) {
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("1K"), 1024u);
  EXPECT_EQ(parse_byte_size("512m"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("10G"), 10ull << 30);
  EXPECT_EQ(parse_byte_size("2t"), 2ull << 40);
}

TEST(ByteSize, RefusesWhatIsNotAWholeSize) {
  for (const char* bad : {"", "G", "1.5G", "-1", "10GB", "10 G", " 10G", "0x10", "1e9", "G10"})
    EXPECT_EQ(parse_byte_size(bad), std::nullopt) << '"' << bad << '"';
}

TEST(ByteSize, RefusesWhatDoesNotFitIn64Bits) {
  EXPECT_EQ(parse_byte_size("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_byte_size("18446744073709551616"), std::nullopt);
  EXPECT_EQ(parse_byte_size("16777215T"), 16777215ull << 40);
  EXPECT_EQ(parse_byte_size("16777216T"), std::nullopt);
}

}  // namespace
}  // namespace gpulimit
