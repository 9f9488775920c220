// How many connections each user may hold, so that no one user can take the
// descriptors everyone else needs to join. A connection costs the server up
// to two descriptors (the socket and, once the process has joined, its
// pidfd); a process that has closed its connection but lives on keeps its
// pidfd and counts as one of its user's connections until it exits.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <unordered_map>

namespace gpulimit::server {

// Default --max-connections-per-uid: more processes than a user's jobs start
// together (300 attaching at once is what server_scale_test.cpp asks: eight
// ranks with their DataLoader workers, several jobs), far fewer than a
// server's descriptors under a usual hard limit.
inline constexpr uint32_t kDefaultMaxConnectionsPerUid = 1024;
// Descriptors the server keeps for itself beyond connections: the board,
// epoll, timers, signalfd, eventfds, the metrics endpoint's sockets, NVML,
// the BPF watcher's maps, the reaper's children.
inline constexpr uint64_t kReservedDescriptors = 64;
// One user may hold at most this fraction of the descriptors left for
// connections, whatever --max-connections-per-uid says.
inline constexpr uint64_t kUidShareOfDescriptors = 4;  // a quarter

// Raises the soft RLIMIT_NOFILE to the hard limit (as many connections as
// the administrator allows); returns the soft limit in force afterwards.
uint64_t raise_descriptor_limit();

// The most connections one uid may hold: `configured`, but no more than a
// quarter of the connections `descriptor_limit` leaves room for (at two
// descriptors each, after kReservedDescriptors), and at least 1.
uint32_t connections_per_uid(uint32_t configured, uint64_t descriptor_limit);

// Connections (and departed processes still watched) per uid.
class UidConnectionCounts {
 public:
  explicit UidConnectionCounts(uint32_t limit) : limit_(limit) {}
  uint32_t limit() const { return limit_; }
  // Counts one more for `uid`, unless it holds `limit` already: false then.
  bool admit(uid_t uid);
  // Counts one more for `uid` whatever it holds: a connection that closed
  // handing its count on to the departed process it leaves.
  void add(uid_t uid) { ++held_[uid]; }
  // One fewer for `uid`.
  void release(uid_t uid);
  uint32_t held(uid_t uid) const;

 private:
  uint32_t limit_;
  std::unordered_map<uid_t, uint32_t> held_;
};

}  // namespace gpulimit::server
