#include "simulator_kernels.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace fakecuda::cupti {
namespace {

template <typename T>
bool parse_number(std::string_view& rest, T& out) {
  const std::size_t space = rest.find(' ');
  if (space == std::string_view::npos) return false;
  const std::string_view field = rest.substr(0, space);
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), out);
  if (error != std::errc() || end != field.data() + field.size()) return false;
  rest.remove_prefix(space + 1);
  return true;
}

// "<pid> <device> <stream> <start_ns> <end_ns> <name>"
bool parse_line(std::string_view line, long& pid, SimulatedKernel& kernel) {
  if (!parse_number(line, pid) || !parse_number(line, kernel.physical_device) ||
      !parse_number(line, kernel.stream) || !parse_number(line, kernel.start_ns) ||
      !parse_number(line, kernel.end_ns) || line.empty())
    return false;
  kernel.name = std::string(line);
  return true;
}

}  // namespace

std::vector<SimulatedKernel> TraceFollower::new_kernels_of(pid_t pid) {
  std::vector<SimulatedKernel> kernels;
  if (!opened_) {
    opened_ = true;
    const char* path = std::getenv("FAKECUDA_TRACE");
    if (!path || !*path) {
      std::fprintf(stderr, "fakecuda cupti: FAKECUDA_TRACE is not set, so no kernel is seen\n");
      return kernels;
    }
    // The simulator creates the file at cuInit; until then there is nothing
    // to read, and the next flush tries again.
    fd_ = open(path, O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      if (errno == ENOENT)
        opened_ = false;
      else
        std::fprintf(stderr, "fakecuda cupti: cannot read %s: %s\n", path, std::strerror(errno));
      return kernels;
    }
  }
  if (fd_ < 0) return kernels;
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t got = pread(fd_, chunk, sizeof chunk, static_cast<off_t>(offset_ + text.size()));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(chunk, static_cast<std::size_t>(got));
  }
  std::size_t consumed = 0;
  for (;;) {
    const std::size_t newline = text.find('\n', consumed);
    if (newline == std::string::npos) break;
    const std::string_view line(text.data() + consumed, newline - consumed);
    consumed = newline + 1;
    long line_pid = 0;
    SimulatedKernel kernel;
    if (parse_line(line, line_pid, kernel) && line_pid == pid) kernels.push_back(std::move(kernel));
  }
  offset_ += consumed;
  return kernels;
}

std::vector<SimulatedDevice> visible_devices() {
  std::vector<SimulatedDevice> devices;
  // Only a driver the program loaded: RTLD_NOLOAD never loads one.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!driver) return devices;
  auto get_count = reinterpret_cast<CUresult (*)(int*)>(dlsym(driver, "cuDeviceGetCount"));
  auto get = reinterpret_cast<CUresult (*)(CUdevice*, int)>(dlsym(driver, "cuDeviceGet"));
  auto get_uuid =
      reinterpret_cast<CUresult (*)(CUuuid*, CUdevice)>(dlsym(driver, "cuDeviceGetUuid_v2"));
  int count = 0;
  if (get_count && get && get_uuid && get_count(&count) == CUDA_SUCCESS) {
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      SimulatedDevice device;
      CUdevice handle = 0;
      if (get(&handle, ordinal) != CUDA_SUCCESS || get_uuid(&device.uuid, handle) != CUDA_SUCCESS)
        continue;
      device.ordinal = ordinal;
      device.physical = static_cast<unsigned char>(device.uuid.bytes[15]);
      devices.push_back(device);
    }
  }
  dlclose(driver);
  return devices;
}

}  // namespace fakecuda::cupti
