// The GPUs a job sees as CUDA numbers them, asked of the driver itself: only
// the driver knows its order (CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES with
// indices, UUID prefixes or MIG instances), and --device-mem's indices are
// that order. gpulimit binds them to UUIDs before the job starts, so that a
// process of the job that narrows CUDA_VISIBLE_DEVICES keeps each GPU's cap.
#pragma once

#include <string>
#include <vector>

#include "gpulimit/options/limits.h"

namespace gpulimit::cli {

// The UUID of each CUDA device, in ordinal order, as a process with this
// environment sees them. The driver is loaded and initialised in a child
// process with no limits in its environment, so that neither gpulimit nor the
// job inherits a driver's state. False with `error` set to one line when the
// driver cannot be loaded or fails.
bool list_cuda_devices(std::vector<options::DeviceUuid>& uuids, std::string& error);

// Binds the ordinal entries of `memory` (options/limits.h) to the GPUs the
// job sees, when the driver can say which they are. False with `error` set
// to one line naming --device-mem when an index and a UUID disagree.
bool bind_device_caps(options::MemoryLimits& memory, std::string& error);

}  // namespace gpulimit::cli
