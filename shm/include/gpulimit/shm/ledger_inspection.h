// A tenant's memory ledger seen from outside the tenant: what gpulimitd does
// with its tenants' ledger files. Neither function attaches (no process slot
// is taken), creates, rebuilds or removes a file, and the ledger works the
// same with or without anyone calling them.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace gpulimit::shm {

// One device of a ledger: its cap, the whole tenant's bytes on it, and how
// many reservations the cap refused there since the ledger was built.
struct LedgerDeviceUsage {
  std::array<unsigned char, 16> uuid{};
  uint64_t cap = 0;
  uint64_t used = 0;
  uint64_t oom_denials = 0;
};

// Reads the devices of the ledger at `path`, which must be a regular file
// owned by `owner`. Reads with pread and never maps the file, so a file
// truncated meanwhile does no harm; the figures may be out of date a moment
// later. False, with a one-line `error` naming the file, when there is no
// such ledger or it is not one of this layout.
bool read_ledger_usage(const std::string& path, uid_t owner,
                       std::vector<LedgerDeviceUsage>& devices, std::string& error) noexcept;

enum class LedgerReapOutcome {
  kReaped,    // dead processes' bytes given back and their slots freed (or none was dead)
  kBusy,      // a process is opening the ledger, another reaper holds it, or a live
              // process stayed in the middle of reserve/release: try again shortly
  kAbsent,    // no ledger at `path`
  kUnusable,  // not a regular file owned by `owner`, or not a ledger of this layout
};

// Recounts the ledger at `path` as a process of the tenant does when it
// reaps (tenant_ledger.cpp), so that the bytes of processes that died come
// back without waiting for a live process of the tenant to notice. Never
// waits on a lock: what is busy is reported, for the caller to retry.
//
// Maps the file read-write: its owner could shrink it meanwhile and turn the
// next access into SIGBUS. Call it where that harms nobody but the caller
// (gpulimitd calls it in a short-lived child process).
LedgerReapOutcome reap_ledger(const std::string& path, uid_t owner, std::string& error) noexcept;

}  // namespace gpulimit::shm
