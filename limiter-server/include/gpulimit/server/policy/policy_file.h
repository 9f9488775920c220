// Reading policy.toml (the format: limiter-server/policy.toml, which
// documents every setting). A file with an error is refused whole, with
// "FILE:LINE:COLUMN: what" in one line; keys it does not know, and users or
// groups the system does not know, are warnings and the rest applies.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/server/policy/policy.h"
#include "gpulimit/server/result.h"

namespace gpulimit::server {

// Where gpulimitd --system reads its policy unless --policy says otherwise.
inline constexpr std::string_view kSystemPolicyPath = "/etc/gpulimit/policy.toml";

struct LoadedPolicy {
  std::shared_ptr<const Policy> policy;
  std::vector<std::string> warnings;  // "FILE:LINE:COLUMN: what", one each
};

// What the file's names and device indices mean on this machine. The
// defaults ask NSS and NVML; tests put in their own.
struct PolicyLookups {
  std::function<std::optional<uid_t>(const std::string& name)> user_id;
  std::function<std::optional<gid_t>(const std::string& name)> group_id;
  std::function<bool(uid_t)> uid_known;
  std::function<bool(gid_t)> gid_known;
  // The UUIDs of the machine's GPUs in NVML index order, asked only when
  // the file names a device by index; fails with one line.
  std::function<Result<std::vector<GpuUuid>>()> gpus;
};
PolicyLookups system_lookups();

// Parses `text` as the policy file `path` (named in every message).
Result<LoadedPolicy> parse_policy(std::string_view text, const std::string& path,
                                  const PolicyLookups& lookups);
// Reads and parses the file at `path`.
Result<LoadedPolicy> load_policy_file(const std::string& path, const PolicyLookups& lookups);

// The policy of a server configured with `path`: none (a null policy) when
// `path` is empty, or when `optional` (the mode's default path) and there is
// no file there.
Result<LoadedPolicy> load_server_policy(const std::string& path, bool optional,
                                        const PolicyLookups& lookups);

// The machine's GPUs as NVML lists them (libnvidia-ml.so.1, loaded now).
Result<std::vector<GpuUuid>> nvml_gpu_uuids();

}  // namespace gpulimit::server
