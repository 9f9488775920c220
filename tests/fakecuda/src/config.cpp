#include "config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpulimit/byte_size.h"

namespace fakecuda {
namespace {

// One row per variable: the whole surface of the simulator's configuration.
//   FAKECUDA_DEVICES          number of devices (0..16)                    1
//   FAKECUDA_MEM              memory per device, or a comma list           16G
//   FAKECUDA_SMS              SM count per device, or a comma list         132
//   FAKECUDA_CTX_MEM          device memory one context takes              256M
//   FAKECUDA_CC               compute capability                           9.0
//   FAKECUDA_CLOCK_KHZ        SM clock in kHz                              1980000
//   FAKECUDA_MEM_CLOCK_KHZ    peak memory clock in kHz                     2619000
//   FAKECUDA_BUS_WIDTH        memory bus width in bits                     5120
//   FAKECUDA_NAME             device name                      FakeCUDA Simulated GPU
//   FAKECUDA_DRIVER_VERSION   cuDriverGetVersion (1000*major + 10*minor)   13000
//   FAKECUDA_STATE            shared state file       /dev/shm/fakecuda-<uid>.state
//   FAKECUDA_TRACE            one line per executed kernel to this file    (off)
//   FAKECUDA_KERNEL_NS        a kernel's base duration                     10000
//   FAKECUDA_KERNEL_NS_PER_WAVE  plus this per wave (one block per SM)     100
//   FAKECUDA_LAUNCH_DELAY_NS  host time a launch spends before the lock    0
//   CUDA_MODULE_LOADING       LAZY or EAGER, as with the real driver       LAZY
constexpr uint32_t kDefaultDevices = 1;
constexpr uint64_t kDefaultMem = 16ull << 30;
constexpr uint32_t kDefaultSms = 132;
constexpr uint64_t kDefaultContextMem = 256ull << 20;
constexpr uint32_t kDefaultDriverVersion = 13000;
constexpr uint64_t kDefaultKernelNs = 10000;
// An H100 SXM5: 1980 MHz boost clock, HBM3 at 2619 MHz on a 5120-bit bus.
constexpr uint32_t kDefaultClockKhz = 1980000;
constexpr uint32_t kDefaultMemClockKhz = 2619000;
constexpr uint32_t kDefaultBusWidth = 5120;
constexpr uint64_t kDefaultKernelNsPerWave = 100;
constexpr const char* kDefaultName = "FakeCUDA Simulated GPU";

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return (value && *value) ? value : nullptr;
}

bool parse_uint(const std::string& text, uint64_t& out) {
  if (text.empty() || text.size() > 19) return false;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  out = value;
  return true;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

// A per-device value: one value for all devices, or one per device.
template <typename Parse>
bool per_device(const char* var, uint32_t count, std::string& error, Parse parse) {
  const char* raw = env(var);
  if (!raw) return true;
  std::vector<std::string> parts = split(raw, ',');
  if (parts.size() != 1 && parts.size() != count) {
    error = std::string(var) + "=" + raw + ": give one value or one per device (" +
            std::to_string(count) + ")";
    return false;
  }
  for (uint32_t i = 0; i < count; ++i) {
    const std::string& part = parts.size() == 1 ? parts[0] : parts[i];
    if (!parse(i, part)) {
      error = std::string(var) + "=" + raw + ": '" + part + "' is not a valid value";
      return false;
    }
  }
  return true;
}

}  // namespace

bool MachineConfig::operator==(const MachineConfig& other) const {
  return std::memcmp(this, &other, sizeof(*this)) == 0;
}

std::string format_uuid(const char (&uuid)[16]) {
  char text[64];
  const auto* b = reinterpret_cast<const unsigned char*>(uuid);
  std::snprintf(text, sizeof(text),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return text;
}

bool load_config(Config& out, std::string& error) {
  Config config;
  MachineConfig& m = config.machine;

  uint64_t count = kDefaultDevices;
  if (const char* raw = env("FAKECUDA_DEVICES");
      raw && (!parse_uint(raw, count) || count > kMaxDevices)) {
    error = std::string("FAKECUDA_DEVICES=") + raw + ": expected a number from 0 to " +
            std::to_string(kMaxDevices);
    return false;
  }
  m.device_count = static_cast<uint32_t>(count);

  uint64_t driver_version = kDefaultDriverVersion;
  if (const char* raw = env("FAKECUDA_DRIVER_VERSION");
      raw &&
      (!parse_uint(raw, driver_version) || driver_version < 1000 || driver_version > 99990)) {
    error = std::string("FAKECUDA_DRIVER_VERSION=") + raw + ": expected e.g. 13000 for CUDA 13.0";
    return false;
  }
  m.driver_version = static_cast<uint32_t>(driver_version);

  uint64_t context_mem = kDefaultContextMem;
  if (const char* raw = env("FAKECUDA_CTX_MEM")) {
    std::optional<uint64_t> bytes = gpulimit::parse_byte_size(raw);
    if (!bytes) {
      error = std::string("FAKECUDA_CTX_MEM=") + raw + ": expected a size such as 256M";
      return false;
    }
    context_mem = *bytes;
  }

  uint32_t cc_major = 9, cc_minor = 0;
  if (const char* raw = env("FAKECUDA_CC")) {
    unsigned major = 0, minor = 0;
    char tail = 0;
    if (std::sscanf(raw, "%u.%u%c", &major, &minor, &tail) != 2 || major < 3 || major > 20 ||
        minor > 9) {
      error = std::string("FAKECUDA_CC=") + raw + ": expected MAJOR.MINOR such as 9.0";
      return false;
    }
    cc_major = major;
    cc_minor = minor;
  }
  // Whole-machine numbers: a positive integer no larger than `max`.
  auto machine_value = [&](const char* var, uint32_t fallback, uint64_t max, uint32_t& value_out) {
    value_out = fallback;
    const char* raw = env(var);
    if (!raw) return true;
    uint64_t value = 0;
    if (!parse_uint(raw, value) || value == 0 || value > max) {
      error = std::string(var) + "=" + raw + ": expected a number from 1 to " + std::to_string(max);
      return false;
    }
    value_out = static_cast<uint32_t>(value);
    return true;
  };
  uint32_t clock_khz = 0, mem_clock_khz = 0, bus_width = 0;
  if (!machine_value("FAKECUDA_CLOCK_KHZ", kDefaultClockKhz, 10'000'000, clock_khz) ||
      !machine_value("FAKECUDA_MEM_CLOCK_KHZ", kDefaultMemClockKhz, 20'000'000, mem_clock_khz) ||
      !machine_value("FAKECUDA_BUS_WIDTH", kDefaultBusWidth, 65536, bus_width))
    return false;
  const char* name = env("FAKECUDA_NAME");
  if (!name) name = kDefaultName;

  for (uint32_t i = 0; i < m.device_count; ++i) {
    DeviceConfig& d = m.devices[i];
    d.total_mem = kDefaultMem;
    d.context_mem = context_mem;
    d.sm_count = kDefaultSms;
    d.cc_major = cc_major;
    d.cc_minor = cc_minor;
    d.clock_khz = clock_khz;
    d.mem_clock_khz = mem_clock_khz;
    d.bus_width_bits = bus_width;
    std::snprintf(d.name, sizeof(d.name), "%s", name);
    // A fixed, recognisable UUID per index: fa4ec0da-... ending in the index.
    const unsigned char base[16] = {0xfa, 0x4e, 0xc0, 0xda, 0x00, 0x00, 0x40, 0x00,
                                    0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    std::memcpy(d.uuid, base, sizeof(base));
    d.uuid[15] = static_cast<char>(i);
  }
  auto parse_mem = [&](uint32_t i, const std::string& part) {
    std::optional<uint64_t> bytes = gpulimit::parse_byte_size(part);
    if (!bytes || *bytes < (64ull << 20)) return false;
    m.devices[i].total_mem = *bytes;
    return true;
  };
  auto parse_sms = [&](uint32_t i, const std::string& part) {
    uint64_t sms = 0;
    if (!parse_uint(part, sms) || sms == 0 || sms > 1024) return false;
    m.devices[i].sm_count = static_cast<uint32_t>(sms);
    return true;
  };
  if (!per_device("FAKECUDA_MEM", m.device_count, error, parse_mem)) return false;
  if (!per_device("FAKECUDA_SMS", m.device_count, error, parse_sms)) return false;
  for (uint32_t i = 0; i < m.device_count; ++i) {
    if (m.devices[i].context_mem >= m.devices[i].total_mem) {
      error = "FAKECUDA_CTX_MEM must be smaller than the device memory";
      return false;
    }
  }

  ProcessOptions& p = config.process;
  if (const char* raw = env("FAKECUDA_STATE")) {
    p.state_path = raw;
  } else {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    p.state_path = std::string(dir) + "/fakecuda-" + std::to_string(getuid()) + ".state";
  }
  if (const char* raw = env("FAKECUDA_TRACE")) p.trace_path = raw;
  p.default_kernel_ns = kDefaultKernelNs;
  if (const char* raw = env("FAKECUDA_KERNEL_NS"); raw && !parse_uint(raw, p.default_kernel_ns)) {
    error = std::string("FAKECUDA_KERNEL_NS=") + raw + ": expected nanoseconds";
    return false;
  }
  p.kernel_ns_per_wave = kDefaultKernelNsPerWave;
  if (const char* raw = env("FAKECUDA_KERNEL_NS_PER_WAVE");
      raw && !parse_uint(raw, p.kernel_ns_per_wave)) {
    error = std::string("FAKECUDA_KERNEL_NS_PER_WAVE=") + raw + ": expected nanoseconds";
    return false;
  }
  // The real driver reads only EAGER; anything else is its default, LAZY.
  if (const char* raw = env("CUDA_MODULE_LOADING"))
    p.eager_module_loading = std::string(raw) == "EAGER";
  if (const char* raw = env("FAKECUDA_LAUNCH_DELAY_NS");
      raw && !parse_uint(raw, p.launch_delay_ns)) {
    error = std::string("FAKECUDA_LAUNCH_DELAY_NS=") + raw + ": expected nanoseconds";
    return false;
  }
  if (const char* raw = std::getenv("CUDA_VISIBLE_DEVICES")) {
    p.visible_devices = raw;
    p.visible_devices_set = true;
  }
  out = config;
  return true;
}

}  // namespace fakecuda
