// MD2 (RFC 1319) and HMAC over it (RFC 2104). The real driver answers the
// runtime's integrity check with HMAC-MD2, so the simulator needs both; MD2
// is long broken as a hash and is used for nothing else here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace fakecuda {

using Md2Digest = std::array<uint8_t, 16>;

class Md2 {
 public:
  static constexpr size_t kBlockSize = 16;

  void update(const void* data, size_t bytes);
  Md2Digest finish();  // pads, appends the checksum; the object is spent

 private:
  void compress();

  uint8_t state_[48] = {};     // X: the state, then the block, then their xor
  uint8_t checksum_[16] = {};  // C
  uint8_t last_ = 0;           // L: the checksum byte most recently written
  size_t filled_ = 0;          // bytes of the current block in state_[16..32)
};

// HMAC-MD2 with a key of at most one block (16 bytes), which is all the
// driver needs: a longer key would first be hashed, as RFC 2104 says.
class HmacMd2 {
 public:
  HmacMd2(const uint8_t* key, size_t key_bytes);
  void update(const void* data, size_t bytes) { inner_.update(data, bytes); }
  Md2Digest finish();

 private:
  uint8_t key_[Md2::kBlockSize] = {};
  Md2 inner_;
};

}  // namespace fakecuda
