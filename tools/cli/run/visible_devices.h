// How many CUDA devices a job sees: the machine's GPUs as NVML lists them,
// narrowed by CUDA_VISIBLE_DEVICES as the driver reads it. Device indices
// in gpulimit's options are ordinals among these.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpulimit::cli {

// `gpu_uuids`: every GPU of the machine ("GPU-..."), in NVML order.
// `mask`: CUDA_VISIBLE_DEVICES, nullopt when unset. Its entries are device
// indices, GPU UUIDs or unique prefixes of them (case-insensitive), or MIG
// UUIDs; the first entry that is malformed, unknown, ambiguous or repeated
// ends the list, and an empty mask hides every device.
unsigned count_visible_devices(const std::vector<std::string>& gpu_uuids,
                               std::optional<std::string_view> mask);

}  // namespace gpulimit::cli
