#include "md2.h"

#include <algorithm>
#include <cstring>

namespace fakecuda {
namespace {

// RFC 1319's substitution table, a permutation of 0..255 built from the
// digits of pi.
constexpr uint8_t kPiSubst[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,  98,  167, 5,
    243, 192, 199, 115, 140, 152, 147, 43,  217, 188, 76,  130, 202, 30,  155, 87,  60,  253, 212,
    224, 22,  103, 66,  111, 24,  138, 23,  229, 18,  190, 78,  196, 214, 218, 158, 222, 73,  160,
    251, 245, 142, 187, 47,  238, 122, 169, 104, 121, 145, 21,  178, 7,   63,  148, 194, 16,  137,
    11,  34,  95,  33,  128, 127, 93,  154, 90,  144, 50,  39,  53,  62,  204, 231, 191, 247, 151,
    3,   255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,  170, 198, 79,  184,
    56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241, 69,  157, 112, 89,  100,
    113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,   27,  96,  37,  173, 174, 176, 185, 246,
    28,  70,  97,  105, 52,  64,  126, 15,  85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249,
    206, 186, 197, 234, 38,  44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129,
    77,  82,  106, 220, 55,  200, 108, 193, 171, 250, 36,  225, 123, 8,   12,  189, 177, 74,  120,
    136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254, 59,  0,   29,  57,  242, 239, 183, 14,
    102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,  49,  68,  80,  180, 143, 237, 31,
    26,  219, 153, 141, 51,  159, 17,  131, 20,
};

}  // namespace

void Md2::compress() {
  uint8_t* block = state_ + 16;
  for (size_t j = 0; j < 16; ++j) {
    state_[32 + j] = static_cast<uint8_t>(block[j] ^ state_[j]);
    // The checksum as corrected in RFC 1319's errata: C[j] ^= S[M[j] ^ L].
    checksum_[j] ^= kPiSubst[block[j] ^ last_];
    last_ = checksum_[j];
  }
  uint8_t t = 0;
  for (size_t round = 0; round < 18; ++round) {
    for (uint8_t& x : state_)
      t = x ^= kPiSubst[t];
    t = static_cast<uint8_t>(t + round);
  }
}

void Md2::update(const void* data, size_t bytes) {
  const auto* in = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    const size_t n = std::min(bytes, kBlockSize - filled_);
    std::memcpy(state_ + 16 + filled_, in, n);
    filled_ += n;
    in += n;
    bytes -= n;
    if (filled_ == kBlockSize) {
      compress();
      filled_ = 0;
    }
  }
}

Md2Digest Md2::finish() {
  // Always pad, 1 to 16 bytes each holding the pad's length.
  const uint8_t pad = static_cast<uint8_t>(kBlockSize - filled_);
  uint8_t padding[kBlockSize];
  std::memset(padding, pad, pad);
  update(padding, pad);
  uint8_t checksum[16];
  std::memcpy(checksum, checksum_, sizeof(checksum));
  update(checksum, sizeof(checksum));
  Md2Digest digest;
  std::memcpy(digest.data(), state_, digest.size());
  return digest;
}

HmacMd2::HmacMd2(const uint8_t* key, size_t key_bytes) {
  std::memcpy(key_, key, std::min(key_bytes, sizeof(key_)));
  uint8_t inner_pad[Md2::kBlockSize];
  for (size_t i = 0; i < sizeof(inner_pad); ++i)
    inner_pad[i] = key_[i] ^ 0x36;
  inner_.update(inner_pad, sizeof(inner_pad));
}

Md2Digest HmacMd2::finish() {
  const Md2Digest inner = inner_.finish();
  uint8_t outer_pad[Md2::kBlockSize];
  for (size_t i = 0; i < sizeof(outer_pad); ++i)
    outer_pad[i] = key_[i] ^ 0x5c;
  Md2 outer;
  outer.update(outer_pad, sizeof(outer_pad));
  outer.update(inner.data(), inner.size());
  return outer.finish();
}

}  // namespace fakecuda
