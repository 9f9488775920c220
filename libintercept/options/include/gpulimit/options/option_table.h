// Every setting gpulimit takes, one row each. libgpulimit.so reads the
// variables; the gpulimit CLI offers the flags, checks them and writes the
// variables for the job. Both parse a value with the one parser its row
// names, so `--mem 10G` and `GPULIMIT_MEM=10G` cannot mean two things.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace gpulimit::options {

// Indexes kOptionTable.
enum class OptionId : unsigned char { kMem, kDeviceMem, kTenant, kLedgerDir };

enum class ValueKind : unsigned char {
  kAmount,         // a size (10G) or a share of each device (50%)
  kDeviceAmounts,  // INDEX=AMOUNT per device, comma-separated (0=10G,1=20%)
  kTenantId,       // [A-Za-z0-9._-]{1,64}
  kAbsolutePath,   // a directory, given as an absolute path
};

struct OptionSpec {
  OptionId id;
  std::string_view name;
  std::string_view variable;
  // The CLI's flag; empty where the CLI sets the variable itself.
  std::string_view flag;
  // HAMi's name for the same setting, read by the library only, so that a
  // HAMi/Volcano cluster can use libgpulimit.so unchanged. For a per-device
  // setting, the prefix of one variable per device: <alias><index>.
  std::string_view hami_alias;
  ValueKind kind;
  std::string_view metavar;
  std::string_view examples;
  std::string_view help;
};

inline constexpr std::array kOptionTable = {
    OptionSpec{OptionId::kMem, "mem", "GPULIMIT_MEM", "--mem", "CUDA_DEVICE_MEMORY_LIMIT",
               ValueKind::kAmount, "SIZE", "10G, 512M, 50%",
               "Memory cap of the tenant on every device it uses"},
    OptionSpec{OptionId::kDeviceMem, "device-mem", "GPULIMIT_DEVICE_MEM", "--device-mem",
               "CUDA_DEVICE_MEMORY_LIMIT_", ValueKind::kDeviceAmounts, "LIST", "0=10G,1=20%",
               "Memory cap per device, overriding --mem for the devices it names"},
    OptionSpec{OptionId::kTenant, "tenant", "GPULIMIT_TENANT", "", "", ValueKind::kTenantId, "ID",
               "train-42", "The tenant the process belongs to"},
    OptionSpec{OptionId::kLedgerDir, "ledger-dir", "GPULIMIT_LEDGER_DIR", "", "",
               ValueKind::kAbsolutePath, "DIR", "/dev/shm",
               "Directory of the shared memory ledgers (default /dev/shm)"},
};

inline constexpr std::size_t kOptionCount = kOptionTable.size();

constexpr const OptionSpec& option(OptionId id) {
  return kOptionTable[static_cast<std::size_t>(id)];
}

// option() indexes the table by id: each row must sit at its id.
constexpr bool rows_match_ids() {
  for (std::size_t i = 0; i < kOptionCount; ++i)
    if (static_cast<std::size_t>(kOptionTable[i].id) != i) return false;
  return true;
}
static_assert(rows_match_ids(), "kOptionTable rows must be in OptionId order");

}  // namespace gpulimit::options
