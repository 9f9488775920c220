// The GPUs of this machine as the server's own NVML lists them. A Hello may
// name only these: the board has kBoardDevices slots for every user of the
// machine, and a client that could publish made-up devices could fill them
// all and leave every later tenant ungated.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "gpulimit/server/daemon/server_config.h"
#include "gpulimit/server/loop/hello_validation.h"

namespace gpulimit::server {

class MachineGpus {
 public:
  // What NVML lists now (libnvidia-ml.so.1, loaded and initialised for the
  // read); an unknown view, saying why, when it cannot be read.
  static MachineGpus from_nvml();
  static MachineGpus listed(std::vector<DeviceUuid> uuids);
  static MachineGpus unknown(std::string why);

  // Whether the server knows the machine's GPUs.
  bool known() const { return known_; }
  const std::vector<DeviceUuid>& uuids() const { return uuids_; }
  const std::string& why_unknown() const { return why_unknown_; }

  // The one-line refusal of a Hello naming `uuids` to a server in `mode`;
  // nullopt when it may be served. Known: every device must be one of the
  // machine's. Unknown: a system server serves no device (it cannot tell a
  // real one from a made-up one, and every user may connect to it); a
  // per-user server serves what its own user's processes name, since no one
  // else can connect to it.
  std::optional<std::string> refusal(const std::vector<DeviceUuid>& uuids, ServerMode mode) const;

  // For the log at start: what the server knows and what follows from it.
  std::string describe(ServerMode mode) const;

 private:
  bool known_ = false;
  std::vector<DeviceUuid> uuids_;
  std::string why_unknown_;
};

}  // namespace gpulimit::server
