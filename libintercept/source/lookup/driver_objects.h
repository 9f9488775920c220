// Which loaded objects are the driver or NVML, for the answers dlsym and
// dlvsym give: a lookup that lands in the driver (whichever handle it went
// through, whichever copy of the driver it found) is answered with
// gpulimit's hook, except for the driver gpulimit forwards to asking for
// its own backend, which must get what it asked for.
#pragma once

#include <link.h>

namespace gpulimit::lookup {

enum class Library { kOther, kDriver, kNvml };

// What `object` is, by the names the loader knows it by: its file name and
// its DT_SONAME (a renamed copy of libcuda.so.1 still says libcuda.so.1).
Library library_of(const link_map* object);

// True when `object` is the driver or NVML that gpulimit's hooks forward to
// in this namespace: what "libcuda.so.1" and "libnvidia-ml.so.1" name here.
bool is_forwarded_to(const link_map* object);

}  // namespace gpulimit::lookup
