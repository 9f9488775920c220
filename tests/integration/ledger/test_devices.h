// The devices the ledger's integration tests use, named by the same UUIDs in
// the test and in every helper process.
#pragma once

#include <array>
#include <cstring>

namespace ledger_test {

using Uuid = std::array<unsigned char, 16>;

inline Uuid uuid_of(int device) {
  Uuid uuid{};
  std::memcpy(uuid.data(), "GPU-ledger-itest", 16);
  uuid[15] = static_cast<unsigned char>('0' + device);
  return uuid;
}

}  // namespace ledger_test
