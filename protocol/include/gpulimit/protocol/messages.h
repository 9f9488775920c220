// What gpulimitd and its clients (libgpulimit.so in each tenant process, and
// the gpulimit CLI) say to each other over the server's unix socket.
//
// The socket is SOCK_SEQPACKET: one message per packet, boundaries kept, so a
// truncated or oversized packet is seen as such (MSG_TRUNC) and rejected
// whole. Every message opens with Header, the same in every protocol version,
// so each side can tell a peer of another version and say so in one line.
// Fixed-width fields only; strings are NUL-padded arrays.
//
// A tenant process's connection lives as long as the process: the server
// learns of its exit when the connection closes (and from a pidfd), and
// knows who it is from SO_PEERCRED, never from what the message says.
//
//   client                               server
//   Hello (tenant, policy, devices)  ->
//                                    <-  Welcome (+ board fd, read-only,
//                                          + lease page fd when a total
//                                          binds the tenant) | Refused
//   Want (device)                    ->  the process waits for the token
//   LeaseRequest (device, need)      ->  answered in the lease page
//   Idle (device, grant)             ->  a holder with nothing to launch
//   Ack (device, grant)              ->  drained after a revoke
//   StatusRequest                    ->
//                                    <-  StatusReply (JSON)
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gpulimit/shm/board.h"

namespace gpulimit::protocol {

inline constexpr uint32_t kMagic = 0x6d6c'7067;  // "gplm" on the wire
// Raise with every change to a message below. 2: memory in Hello and
// Welcome (the caps the policy grants), the policy's notice in Welcome.
// 3: the job's leader in Hello. 4: leases (memory totals): Welcome's
// leased_devices and lease page, LeaseRequest.
inline constexpr uint16_t kVersion = 4;

// The largest packet either side sends (StatusReply); a bigger one is cut
// off by the kernel and rejected as truncated.
inline constexpr std::size_t kMaxMessageSize = 256 * 1024;

enum class Type : uint16_t {
  kHello = 1,
  kWelcome = 2,
  kRefused = 3,
  kWant = 4,
  kIdle = 5,
  kAck = 6,
  kStatusRequest = 7,
  kStatusReply = 8,
  kLeaseRequest = 9,
};

struct Header {
  uint32_t magic;    // kMagic
  uint16_t version;  // kVersion of the sender
  Type type;
  uint32_t size;  // of the whole message, header included
  uint32_t reserved;
};

enum class Priority : int32_t { kLow = -1, kNormal = 0, kHigh = 1 };

// A tenant process introducing itself, once, right after connecting.
struct Hello {
  Header header;
  char tenant[72];      // the tenant id, [A-Za-z0-9._-]{1,64}, NUL-padded
  int32_t claimed_pid;  // must equal the kernel's word (SO_PEERCRED)
  uint32_t sm_percent;  // hard cap of GPU time, 1 to 100; 0: none
  uint32_t weight;      // share under contention, 1 to kMaxWeight
  Priority priority;
  char ledger_dir[256];   // where the tenant's memory ledger lies, absolute
  uint32_t device_count;  // entries of `uuids`: the GPUs the process sees
  unsigned char uuids[shm::kBoardDevices][16];
  // For each of `uuids`: the memory cap the process asks for there, in
  // bytes (0: none), and the device's size as its driver reports it (what
  // a policy's percentages are of; 0: unknown).
  uint64_t memory_requested[shm::kBoardDevices];
  uint64_t memory_total[shm::kBoardDevices];
  // The job's main process (job_leader.h), from GPULIMIT_JOB_LEADER; pid 0
  // when the job names none. Only the tenant's first Hello's counts.
  int32_t leader_pid;
  uint32_t reserved;
  uint64_t leader_start_ticks;
};
inline constexpr uint32_t kMaxWeight = 1000;

// The server's answer to Hello. Carries the board's file descriptor
// (SCM_RIGHTS), opened read-only, and after it, when `leased_devices` is
// not 0, the tenant's lease page (shm/lease_page.h), read-only too.
struct Welcome {
  Header header;
  uint32_t tenant_number;  // t of the board's token words for this tenant
  uint32_t device_count;   // as in Hello
  // For each of Hello's uuids, in order: its index in BoardLayout::devices.
  uint32_t board_device[shm::kBoardDevices];
  // For each of Hello's uuids: the memory cap granted there, in bytes (0:
  // none). The process caps the device at the smaller of this and its own.
  uint64_t memory_cap[shm::kBoardDevices];
  // What the policy lowered, in one line for the user ("the policy lowers
  // --sm 80 to 50"), NUL-terminated; empty when nothing was, and in the
  // Welcome of every process but the tenant's first.
  char notice[256];
  // Bit i: Hello's device i is under a group's or user's memory total, and
  // the process reserves there within its tenant's lease.
  uint32_t leased_devices;
  uint32_t reserved;
};

// The server's answer to a Hello it will not serve; the connection closes.
struct Refused {
  Header header;
  char reason[256];  // one line for the user, NUL-terminated
};

// The process wants the token of `board_device` and is about to wait for it.
struct Want {
  Header header;
  uint32_t board_device;
};

// The tenant held `board_device` under `grant` and this process has nothing
// more to launch there (its threads launched nothing for a while).
struct Idle {
  Header header;
  uint32_t board_device;
  uint32_t grant;
};

// After token_revoked(t) of `board_device` under `grant`: this process has
// drained what it queued there and launches nothing more until granted.
struct Ack {
  Header header;
  uint32_t board_device;
  uint32_t grant;
};

// A reservation on `board_device` would take the tenant past its lease:
// the process asks for a lease of at least `need` bytes (its tenant's use
// with the reservation) and waits on the device's `answers` in the lease
// page. The server answers every request there, granted or not.
struct LeaseRequest {
  Header header;
  uint32_t board_device;
  uint32_t reserved;
  uint64_t need;
};

struct StatusRequest {
  Header header;
};

// Header followed by header.size - sizeof(Header) bytes of JSON: the status
// schema (status.h), mapped by status_json.h.
struct StatusReply {
  Header header;
};

template <typename Message>
constexpr Type type_of();
template <>
constexpr Type type_of<Hello>() {
  return Type::kHello;
}
template <>
constexpr Type type_of<Welcome>() {
  return Type::kWelcome;
}
template <>
constexpr Type type_of<Refused>() {
  return Type::kRefused;
}
template <>
constexpr Type type_of<Want>() {
  return Type::kWant;
}
template <>
constexpr Type type_of<Idle>() {
  return Type::kIdle;
}
template <>
constexpr Type type_of<Ack>() {
  return Type::kAck;
}
template <>
constexpr Type type_of<LeaseRequest>() {
  return Type::kLeaseRequest;
}
template <>
constexpr Type type_of<StatusRequest>() {
  return Type::kStatusRequest;
}

// A message of type M with its header filled in and every other byte zero.
template <typename M>
M make() {
  static_assert(std::is_trivially_copyable_v<M> && std::is_standard_layout_v<M>);
  M m{};
  m.header = Header{kMagic, kVersion, type_of<M>(), static_cast<uint32_t>(sizeof(M)), 0};
  return m;
}

enum class Problem {
  kNone,
  kTruncated,     // shorter than its header, or than its header says
  kBadMagic,      // not a gpulimit message
  kOtherVersion,  // a gpulimit peer of another protocol version
  kUnknownType,
  kWrongSize,  // a fixed-size message of the wrong size
};

// What is wrong with the `size` bytes received at `data`, if anything.
// Checks the header and, for fixed-size types, the exact size.
Problem check(const void* data, std::size_t size) noexcept;
const char* describe(Problem problem) noexcept;

}  // namespace gpulimit::protocol
