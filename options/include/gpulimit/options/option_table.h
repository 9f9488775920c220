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
enum class OptionId : unsigned char {
  kMem,
  kDeviceMem,
  kSm,
  kWeight,
  kPriority,
  kTenant,
  kLedgerDir,
  kSocket,
};

enum class ValueKind : unsigned char {
  kAmount,         // a size (10G) or a share of each device (50%)
  kDeviceAmounts,  // INDEX=AMOUNT per device, comma-separated (0=10G,1=20%)
  kPercent,        // a whole percentage from 1 to 100, '%' optional (30, 30%)
  kWeight,         // a whole number from 1 to kMaxWeight
  kPriority,       // high, normal or low
  kTenantId,       // [A-Za-z0-9._-]{1,64}
  kAbsolutePath,   // a directory, given as an absolute path
  kSocketPath,     // a unix socket, given as an absolute path that fits sockaddr_un
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
  // One sentence without its period, for --help: lines of at most 70
  // characters, broken with '\n'.
  std::string_view help;
};

inline constexpr std::array kOptionTable = {
    OptionSpec{OptionId::kMem, "mem", "GPULIMIT_MEM", "--mem", "CUDA_DEVICE_MEMORY_LIMIT",
               ValueKind::kAmount, "SIZE", "10G, 512M, 50%",
               "Memory cap of the tenant on every device it uses"},
    OptionSpec{OptionId::kDeviceMem, "device-mem", "GPULIMIT_DEVICE_MEM", "--device-mem",
               "CUDA_DEVICE_MEMORY_LIMIT_", ValueKind::kDeviceAmounts, "LIST", "0=10G,1=20%",
               "Memory cap per device, by CUDA index or GPU UUID (GPU-...), overriding\n"
               "--mem for the devices it names"},
    // A cap, not a share: it holds even when no other tenant wants the GPU.
    // HAMi writes an integer percentage, and 0 for no cap.
    OptionSpec{OptionId::kSm, "sm", "GPULIMIT_SM", "--sm", "CUDA_DEVICE_SM_LIMIT",
               ValueKind::kPercent, "PERCENT", "30, 30%",
               "Hard cap of the tenant's GPU time, a percentage of each device's time,\n"
               "held even when the device is otherwise idle"},
    OptionSpec{OptionId::kWeight, "weight", "GPULIMIT_WEIGHT", "--weight", "", ValueKind::kWeight,
               "WEIGHT", "1, 2, 10",
               "Share of GPU time under contention, in proportion to the weights of\n"
               "the tenants that want the device (default 1)"},
    OptionSpec{OptionId::kPriority, "priority", "GPULIMIT_PRIORITY", "--priority", "",
               ValueKind::kPriority, "PRIORITY", "high, normal, low",
               "Which waiting tenant gets the device first at the end of a quantum\n"
               "(default normal)"},
    OptionSpec{OptionId::kTenant, "tenant", "GPULIMIT_TENANT", "", "", ValueKind::kTenantId, "ID",
               "train-42", "The tenant the process belongs to"},
    OptionSpec{OptionId::kLedgerDir, "ledger-dir", "GPULIMIT_LEDGER_DIR", "", "",
               ValueKind::kAbsolutePath, "DIR", "/dev/shm",
               "Directory of the shared memory ledgers (default /dev/shm)"},
    // Set by the CLI to the server it found or started; unset, the library
    // enforces memory caps alone and time-slices nothing.
    OptionSpec{OptionId::kSocket, "socket", "GPULIMIT_SOCKET", "", "", ValueKind::kSocketPath,
               "PATH", "/run/gpulimit/gpulimitd.sock",
               "The socket of the gpulimitd that time-slices the job's devices"},
};

inline constexpr std::size_t kOptionCount = kOptionTable.size();

constexpr const OptionSpec& option(OptionId id) {
  return kOptionTable[static_cast<std::size_t>(id)];
}

// Whether `name` is a row's variable (GPULIMIT_MEM, ...): one of those
// gpulimit writes for a job and libgpulimit.so reads.
constexpr bool is_option_variable(std::string_view name) {
  for (const OptionSpec& spec : kOptionTable)
    if (name == spec.variable) return true;
  return false;
}

// option() indexes the table by id: each row must sit at its id.
constexpr bool rows_match_ids() {
  for (std::size_t i = 0; i < kOptionCount; ++i)
    if (static_cast<std::size_t>(kOptionTable[i].id) != i) return false;
  return true;
}
static_assert(rows_match_ids(), "kOptionTable rows must be in OptionId order");

}  // namespace gpulimit::options
