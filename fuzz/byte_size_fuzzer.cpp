// Sizes and amounts as people write them: parse_byte_size (--mem, the
// simulator's FAKECUDA_MEM, the workloads' --target), and the option
// values built on it, parse_amount and parse_device_amounts (--mem,
// --device-mem, by CUDA index or GPU UUID), and parse_device_uuid. Asserts that a size is made of
// digits and at most one unit, that it prints back (in bytes, and in the spelling the CLI writes
// for a job) to text that parses to the same size, and that a refusal says
// what is wrong.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "gpulimit/byte_size.h"
#include "gpulimit/options/environment.h"
#include "gpulimit/options/values.h"

namespace {

using namespace gpulimit;
using options::Amount;

// What the CLI writes for a job with `limits`, read back by the library.
options::Limits written_and_read(const options::Limits& limits) {
  std::vector<std::string> assignments;
  FUZZ_CHECK(options::limits_to_environment(limits, assignments));
  std::vector<char*> envp;
  for (std::string& assignment : assignments)
    envp.push_back(assignment.data());
  envp.push_back(nullptr);
  options::Limits read;
  std::string error;
  FUZZ_CHECK(options::limits_from_environment(envp.data(), read, error));
  return read;
}

void check_size(std::string_view text) {
  const std::optional<uint64_t> size = parse_byte_size(text);
  if (!size) return;
  FUZZ_CHECK(!text.empty());
  std::string_view digits = text;
  if (std::string_view("KMGTkmgt").find(digits.back()) != std::string_view::npos)
    digits.remove_suffix(1);
  FUZZ_CHECK(options::all_digits(digits));
  FUZZ_CHECK(parse_byte_size(std::to_string(*size)) == size);
}

void check_amount(std::string_view text) {
  Amount amount;
  std::string reason;
  if (!options::parse_amount(text, amount, reason)) {
    FUZZ_CHECK(!reason.empty());
    return;
  }
  if (amount.kind == Amount::Kind::kPercent) {
    FUZZ_CHECK(amount.value >= 1 && amount.value <= 100);
  } else {
    FUZZ_CHECK(amount.value > 0);
    FUZZ_CHECK(parse_byte_size(text) == amount.value);
  }
  options::Limits limits;
  limits.memory.all = amount;
  FUZZ_CHECK(written_and_read(limits) == limits);
}

void check_device_amounts(std::string_view text) {
  std::map<unsigned, Amount> amounts;
  std::string reason;
  if (!options::parse_device_amounts(text, amounts, reason)) {
    FUZZ_CHECK(!reason.empty());
    FUZZ_CHECK(amounts.empty());  // untouched on failure
    return;
  }
  FUZZ_CHECK(!amounts.empty());
  for (const auto& [device, amount] : amounts) {
    FUZZ_CHECK(device <= options::kMaxDeviceIndex);
    FUZZ_CHECK(amount.value > 0);
  }
  options::Limits limits;
  limits.memory.by_device = amounts;
  FUZZ_CHECK(written_and_read(limits) == limits);
}

// The same lists with GPUs named by UUID too (--device-mem GPU-...=4G), and
// the UUIDs alone.
void check_device_list(std::string_view text) {
  options::MemoryLimits memory;
  std::string reason;
  if (!options::parse_device_amounts(text, memory, reason)) {
    FUZZ_CHECK(!reason.empty());
    FUZZ_CHECK(memory == options::MemoryLimits{});  // untouched on failure
  } else {
    FUZZ_CHECK(!memory.empty());
    options::MemoryLimits again;
    FUZZ_CHECK(
        options::parse_device_amounts(options::format_device_amounts(memory), again, reason));
    FUZZ_CHECK(again == memory);
    options::Limits limits;
    limits.memory = memory;
    FUZZ_CHECK(written_and_read(limits) == limits);
  }
  options::DeviceUuid uuid;
  if (options::parse_device_uuid(text, uuid)) {
    options::DeviceUuid again;
    FUZZ_CHECK(options::parse_device_uuid(options::format_device_uuid(uuid), again));
    FUZZ_CHECK(again == uuid);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_size(text);
  // Values reach these through the environment and argv: C strings.
  if (text.find('\0') != std::string_view::npos) return 0;
  check_amount(text);
  check_device_amounts(text);
  check_device_list(text);
  return 0;
}
