// Ledgers of tenants that have ended. A tenant whose processes were all
// killed cannot remove its own ledger file; the next gpulimit of the same
// user does, before it starts its job.
#pragma once

#include <string>

namespace gpulimit::cli {

// Removes this user's ledgers in `dir` that no live process is attached to.
// Best effort: a ledger in use, or one that cannot be removed, stays.
void sweep_stale_ledgers(const std::string& dir);

}  // namespace gpulimit::cli
