// The board: the shared memory gpulimitd writes and every gated process maps
// read-only. It holds, per physical GPU, the token word that says which
// tenant may launch work now. Nobody but the server can write it: clients
// receive a read-only file descriptor (protocol Welcome) and map it PROT_READ.
//
// The launch gate's fast path is one relaxed load of a device's `token`:
// equal to token_held(my tenant) means launch. Anything else is the slow
// path: tell the server "want" and futex-wait on `token` until it changes.
//
// Like the ledger, the layout holds fixed-width fields and no pointers, is
// versioned, and opens with BoardHeader in every version.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace gpulimit::shm {

inline constexpr uint64_t kBoardMagic = 0x4442'6d69'6c75'7067;  // "gpulimBD" in file order
// Raise with every change of BoardLayout below.
inline constexpr uint32_t kBoardLayoutVersion = 1;
inline constexpr uint32_t kBoardDevices = 16;

// The token word of a device, a futex word:
//   0                    nobody holds the token
//   token_held(t)        tenant t holds it: its processes launch freely
//   token_revoked(t)     tenant t held it and must give it back: its processes
//                        launch nothing more, drain what they queued, and
//                        acknowledge (protocol Ack) the device's `grant`
// t is the server's number for a tenant, 1 to 2^31 - 1, never reused while
// one server runs; a new server starts a new board.
constexpr uint32_t token_held(uint32_t tenant) {
  return tenant << 1;
}
constexpr uint32_t token_revoked(uint32_t tenant) {
  return tenant << 1 | 1u;
}
constexpr uint32_t token_holder(uint32_t token) {
  return token >> 1;
}
constexpr bool token_is_revoked(uint32_t token) {
  return token & 1u;
}
inline constexpr uint32_t kMaxTenantNumber = (uint32_t{1} << 31) - 1;

struct BoardHeader {
  uint64_t magic;           // written last when the board is built
  uint32_t layout_version;  // kBoardLayoutVersion of the server
  uint32_t layout_size;     // sizeof(BoardLayout) of the server
};

struct alignas(64) BoardDevice {
  // Written before the device is published (and before any Welcome names
  // the slot); zeroed when the server frees the slot, once no process it
  // welcomed with the slot is connected, and then reused for another GPU.
  unsigned char uuid[16];
  // The token word above. Written only by the server, which futex-wakes it
  // after each change.
  std::atomic<uint32_t> token;
  // Counts grants of this device; written before `token` on each grant, so
  // a process that sees token_held(t) and then reads `grant` gets that
  // grant's number (or a later one). Acks and idle reports name it. The
  // token is cleared before each grant's number is raised, so a process
  // that sees token_revoked(t), reads `grant` and then sees token_revoked(t)
  // again has the number of a grant that is revoked now.
  std::atomic<uint32_t> grant;
  // Tenants other than the holder that wait for the token. Nonzero tells
  // the holder's processes that an idle holder should give the token back
  // early (protocol Idle). The server futex-wakes `token` when this goes
  // from 0 to nonzero, so that drain threads asleep on `token` notice.
  std::atomic<uint32_t> waiting;
};

struct BoardLayout {
  BoardHeader header;
  uint32_t max_devices;                // kBoardDevices of the server
  std::atomic<uint32_t> device_count;  // entries of `devices` ever written
  int32_t server_pid;
  uint32_t quantum_us;  // the scheduling quantum, for clients' idle window
  BoardDevice devices[kBoardDevices];
};

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "token is a futex word");
static_assert(std::is_standard_layout_v<BoardLayout>);

}  // namespace gpulimit::shm
