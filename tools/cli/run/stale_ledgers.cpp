#include "run/stale_ledgers.h"

#include <unistd.h>

#include "gpulimit/shm/tenant_ledger.h"

namespace gpulimit::cli {

void sweep_stale_ledgers(const std::string& dir) {
  for (const std::string& path : shm::TenantLedger::stale_ledgers(dir, getuid()))
    shm::TenantLedger::remove_if_stale(path);  // rechecked under the openers' lock
}

}  // namespace gpulimit::cli
