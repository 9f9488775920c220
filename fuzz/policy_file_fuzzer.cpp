// gpulimitd's policy file (policy.toml): parse_policy on any text, on a
// machine of two GPUs, users alice and bob and groups ml and students
// (lookups of our own: no NSS, no NVML). Asserts that a refusal and each
// warning are one readable line, and that what a parsed policy grants
// keeps its own rules: every number in its range, and no default above
// the maximum that applies.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "gpulimit/server/policy/policy_file.h"

namespace {

using namespace gpulimit::server;
using gpulimit::fuzz::one_readable_line;

constexpr uid_t kAlice = 1000;
constexpr uid_t kBob = 1001;
constexpr gid_t kMl = 2000;
constexpr gid_t kStudents = 2001;

constexpr GpuUuid kGpu0 = {0x8f, 0x6c, 0x2a, 0x4e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
constexpr GpuUuid kGpu1 = {0x8f, 0x6c, 0x2a, 0x4e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

PolicyLookups machine() {
  PolicyLookups lookups;
  lookups.user_id = [](const std::string& name) -> std::optional<uid_t> {
    if (name == "alice") return kAlice;
    if (name == "bob") return kBob;
    return std::nullopt;
  };
  lookups.group_id = [](const std::string& name) -> std::optional<gid_t> {
    if (name == "ml") return kMl;
    if (name == "students") return kStudents;
    return std::nullopt;
  };
  lookups.uid_known = [](uid_t uid) { return uid == kAlice || uid == kBob; };
  lookups.gid_known = [](gid_t gid) { return gid == kMl || gid == kStudents; };
  lookups.gpus = []() -> Result<std::vector<GpuUuid>> { return std::vector{kGpu0, kGpu1}; };
  return lookups;
}

template <typename T>
void check_range(const std::optional<T>& value, T low, T high) {
  if (value) FUZZ_CHECK(*value >= low && *value <= high);
}

template <typename T>
void check_not_above(const std::optional<T>& value, const std::optional<T>& maximum) {
  if (value && maximum) FUZZ_CHECK(*value <= *maximum);
}

void check_priority_not_above(const std::optional<gpulimit::protocol::Priority>& value,
                              const std::optional<gpulimit::protocol::Priority>& maximum) {
  using gpulimit::protocol::Priority;
  for (const auto& priority : {value, maximum}) {
    if (priority)
      FUZZ_CHECK(*priority == Priority::kLow || *priority == Priority::kNormal ||
                 *priority == Priority::kHigh);
  }
  if (value && maximum) FUZZ_CHECK(static_cast<int>(*value) <= static_cast<int>(*maximum));
}

void check_limits(const EffectiveLimits& limits) {
  check_range<uint32_t>(limits.sm, 1, 100);
  check_range<uint32_t>(limits.max_sm, 1, 100);
  check_range<uint32_t>(limits.weight, 1, gpulimit::protocol::kMaxWeight);
  check_range<uint32_t>(limits.max_weight, 1, gpulimit::protocol::kMaxWeight);
  check_not_above(limits.sm, limits.max_sm);
  check_not_above(limits.weight, limits.max_weight);
  check_not_above(limits.memory, limits.max_memory);
  check_priority_not_above(limits.priority, limits.max_priority);
}

void check_policy(const Policy& policy) {
  const std::vector<PeerIdentity> people = {
      {kAlice, {kMl}}, {kBob, {kStudents, kMl}}, {4242, {4242}}, {0, {0}}};
  constexpr uint64_t kDeviceTotal = uint64_t{80} << 30;
  for (const PeerIdentity& who : people) {
    check_limits(policy.limits_for(who, nullptr, 0));
    for (const GpuUuid& gpu : {kGpu0, kGpu1}) {
      check_limits(policy.limits_for(who, &gpu, kDeviceTotal));
      check_limits(policy.limits_for(who, &gpu, 0));
      const bool may = policy.may_use(who, gpu);
      const std::optional<std::vector<GpuUuid>> allowed = policy.allowed_devices(who);
      if (!allowed) FUZZ_CHECK(may);
    }
    const UnmanagedAction action = policy.unmanaged_action(who, UnmanagedAction::kWarn);
    FUZZ_CHECK(unmanaged_action_name(action) != nullptr);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  // gpulimitd reads at most 1 MiB of policy; the fuzzer's inputs stay far below.
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const PolicyLookups lookups = machine();
  const Result<LoadedPolicy> loaded = parse_policy(text, "policy.toml", lookups);
  if (!loaded.ok()) {
    FUZZ_CHECK(one_readable_line(loaded.error()));
    return 0;
  }
  for (const std::string& warning : loaded->warnings)
    FUZZ_CHECK(one_readable_line(warning));
  FUZZ_CHECK(loaded->policy != nullptr);
  check_policy(*loaded->policy);
  return 0;
}
