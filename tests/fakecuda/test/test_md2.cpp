// MD2 against RFC 1319's test suite, and HMAC-MD2 as RFC 2104 builds it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "md2.h"

namespace fakecuda {
namespace {

std::string hex(const Md2Digest& digest) {
  std::string out;
  char byte[3];
  for (uint8_t b : digest) {
    std::snprintf(byte, sizeof(byte), "%02x", b);
    out += byte;
  }
  return out;
}

Md2Digest md2(const std::string& text) {
  Md2 hash;
  hash.update(text.data(), text.size());
  return hash.finish();
}

TEST(Md2, Rfc1319TestSuite) {
  EXPECT_EQ(hex(md2("")), "8350e5a3e24c153df2275c9f80692773");
  EXPECT_EQ(hex(md2("a")), "32ec01ec4a6dac72c0ab96fb34c0b5d1");
  EXPECT_EQ(hex(md2("abc")), "da853b0d3f88d99b30283a69e6ded6bb");
  EXPECT_EQ(hex(md2("message digest")), "ab4f496bfb2a530b219ff33031fe06b0");
  EXPECT_EQ(hex(md2("abcdefghijklmnopqrstuvwxyz")), "4e8ddff3650292ab5a4108c3aa47940b");
  EXPECT_EQ(hex(md2("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")),
            "da33def2a42df13975352846c30338cd");
  EXPECT_EQ(
      hex(md2("12345678901234567890123456789012345678901234567890123456789012345678901234567890")),
      "d5976f79d83d3a0dc9806c3c66f3efd8");
}

TEST(Md2, PiecesHashLikeTheWhole) {
  const std::string text = "The quick brown fox jumps over the lazy dog, twice over.";
  for (size_t split = 0; split <= text.size(); ++split) {
    Md2 hash;
    hash.update(text.data(), split);
    hash.update(text.data() + split, text.size() - split);
    EXPECT_EQ(hash.finish(), md2(text)) << "split at " << split;
  }
}

// RFC 2104: H((K ^ opad) || H((K ^ ipad) || text)), the key zero-padded to
// the block (16 bytes for MD2).
Md2Digest hmac_by_definition(const std::string& key, const std::string& text) {
  uint8_t k[16] = {};
  std::memcpy(k, key.data(), key.size());
  std::string inner(16, '\0'), outer(16, '\0');
  for (size_t i = 0; i < 16; ++i) {
    inner[i] = static_cast<char>(k[i] ^ 0x36);
    outer[i] = static_cast<char>(k[i] ^ 0x5c);
  }
  const Md2Digest inner_digest = md2(inner + text);
  return md2(outer + std::string(inner_digest.begin(), inner_digest.end()));
}

TEST(HmacMd2, IsRfc2104OverMd2) {
  for (const std::string& key : {std::string("Jefe"), std::string(16, '\x0b'), std::string()}) {
    const std::string text = "what do ya want for nothing?";
    HmacMd2 mac(reinterpret_cast<const uint8_t*>(key.data()), key.size());
    mac.update(text.data(), 10);
    mac.update(text.data() + 10, text.size() - 10);
    EXPECT_EQ(mac.finish(), hmac_by_definition(key, text)) << "key of " << key.size() << " bytes";
  }
}

TEST(HmacMd2, KeyChangesTheAnswer) {
  const uint8_t a[16] = {1}, b[16] = {2};
  HmacMd2 first(a, sizeof(a)), second(b, sizeof(b));
  first.update("x", 1);
  second.update("x", 1);
  EXPECT_NE(first.finish(), second.finish());
}

}  // namespace
}  // namespace fakecuda
