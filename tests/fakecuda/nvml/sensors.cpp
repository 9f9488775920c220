// Clocks, temperature and power, derived from how busy the device is
// (utilization.cpp's one-second window) so that a monitor sees a loaded GPU
// heat up: a modelled H100 SXM, idling at 70 W and 30 C, at 700 W and 70 C
// when kernels run all the time. SXM boards have no fan of their own.
#include <algorithm>

#include "library.h"

namespace {

using fakecuda::nvml::index_of;
using fakecuda::nvml::machine;

constexpr unsigned int kIdlePowerMw = 70'000;
constexpr unsigned int kPowerLimitMw = 700'000;  // the board's TDP, also the default limit
constexpr unsigned int kMinPowerLimitMw = 200'000;
constexpr unsigned int kIdleTemperatureC = 30;
constexpr unsigned int kLoadedTemperatureC = 70;
// An idle GPU drops its graphics clock; memory stays at speed.
constexpr unsigned int kIdleGraphicsMhz = 345;
constexpr unsigned int kMaxVideoMhz = 1755;
constexpr unsigned int kIdleVideoMhz = 765;

unsigned int busy_percent(uint32_t index) {
  return fakecuda::nvml::shared_state().utilization(index, fakecuda::now_ns());
}

// The highest clock of each domain, in MHz; 0 for a type that is none.
unsigned int max_clock(const fakecuda::DeviceConfig& d, nvmlClockType_t type) {
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM:
      return d.clock_khz / 1000;
    case NVML_CLOCK_MEM:
      return d.mem_clock_khz / 1000;
    case NVML_CLOCK_VIDEO:
      return kMaxVideoMhz;
  }
  return 0;
}

unsigned int current_clock(uint32_t index, nvmlClockType_t type) {
  const fakecuda::DeviceConfig& d = machine().devices[index];
  const bool busy = busy_percent(index) > 0;
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM:
      return busy ? max_clock(d, type) : std::min(kIdleGraphicsMhz, max_clock(d, type));
    case NVML_CLOCK_VIDEO:
      return busy ? kMaxVideoMhz : kIdleVideoMhz;
    case NVML_CLOCK_MEM:
      return max_clock(d, type);
  }
  return 0;
}

nvmlReturn_t checked_clock(nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock,
                           uint32_t* index) {
  if (nvmlReturn_t r = index_of(device, *index); r != NVML_SUCCESS) return r;
  if (!clock || max_clock(machine().devices[*index], type) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

unsigned int power_mw(uint32_t index) {
  return kIdlePowerMw + (kPowerLimitMw - kIdlePowerMw) / 100 * busy_percent(index);
}

unsigned int temperature_c(uint32_t index) {
  return kIdleTemperatureC + (kLoadedTemperatureC - kIdleTemperatureC) * busy_percent(index) / 100;
}

nvmlReturn_t max_clock_query(nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock) {
  uint32_t index = 0;
  if (nvmlReturn_t r = checked_clock(device, type, clock, &index); r != NVML_SUCCESS) return r;
  *clock = max_clock(machine().devices[index], type);
  return NVML_SUCCESS;
}

nvmlReturn_t fan_speed(nvmlDevice_t device, unsigned int* speed) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!speed) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t clocks_event_reasons(nvmlDevice_t device, unsigned long long* reasons) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!reasons) return NVML_ERROR_INVALID_ARGUMENT;
  *reasons = busy_percent(index) > 0 ? nvmlClocksEventReasonNone : nvmlClocksEventReasonGpuIdle;
  return NVML_SUCCESS;
}

nvmlReturn_t power_limit(nvmlDevice_t device, unsigned int* limit) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!limit) return NVML_ERROR_INVALID_ARGUMENT;
  *limit = kPowerLimitMw;
  return NVML_SUCCESS;
}

}  // namespace

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                         unsigned int* clock) {
  uint32_t index = 0;
  if (nvmlReturn_t r = checked_clock(device, type, clock, &index); r != NVML_SUCCESS) return r;
  *clock = current_clock(index, type);
  return NVML_SUCCESS;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device,
                                                            nvmlClockType_t type,
                                                            unsigned int* clock) {
  return max_clock_query(device, type, clock);
}

// Applications clocks are left at their defaults: the maximum clocks.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device,
                                                                 nvmlClockType_t clockType,
                                                                 unsigned int* clockMHz) {
  return max_clock_query(device, clockType, clockMHz);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device,
                                                                        nvmlClockType_t clockType,
                                                                        unsigned int* clockMHz) {
  return max_clock_query(device, clockType, clockMHz);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, nvmlClockType_t clockType,
                                                     nvmlClockId_t clockId,
                                                     unsigned int* clockMHz) {
  uint32_t index = 0;
  if (nvmlReturn_t r = checked_clock(device, clockType, clockMHz, &index); r != NVML_SUCCESS)
    return r;
  switch (clockId) {
    case NVML_CLOCK_ID_CURRENT:
      *clockMHz = current_clock(index, clockType);
      return NVML_SUCCESS;
    case NVML_CLOCK_ID_APP_CLOCK_TARGET:
    case NVML_CLOCK_ID_APP_CLOCK_DEFAULT:
    case NVML_CLOCK_ID_CUSTOMER_BOOST_MAX:
      *clockMHz = max_clock(machine().devices[index], clockType);
      return NVML_SUCCESS;
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                           nvmlTemperatureSensors_t sensorType,
                                                           unsigned int* temp) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!temp || sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = temperature_c(index);
  return NVML_SUCCESS;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device,
                                                            nvmlTemperature_t* temperature) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!temperature) return NVML_ERROR_INVALID_ARGUMENT;
  if (temperature->version != nvmlTemperature_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (temperature->sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  temperature->temperature = static_cast<int>(temperature_c(index));
  return NVML_SUCCESS;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device,
                                                          unsigned int* power) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!power) return NVML_ERROR_INVALID_ARGUMENT;
  *power = power_mw(index);
  return NVML_SUCCESS;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device,
                                                                    unsigned int* limit) {
  return power_limit(device, limit);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t
nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int* defaultLimit) {
  return power_limit(device, defaultLimit);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device,
                                                                  unsigned int* limit) {
  return power_limit(device, limit);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(
    nvmlDevice_t device, unsigned int* minLimit, unsigned int* maxLimit) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!minLimit || !maxLimit) return NVML_ERROR_INVALID_ARGUMENT;
  *minLimit = kMinPowerLimitMw;
  *maxLimit = kPowerLimitMw;
  return NVML_SUCCESS;
}

// Millijoules since the simulated machine came up: idle power all along,
// plus the loaded power above it for every nanosecond a kernel ran.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                                      unsigned long long* energy) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!energy) return NVML_ERROR_INVALID_ARGUMENT;
  fakecuda::SharedState& state = fakecuda::nvml::shared_state();
  const uint64_t now = fakecuda::now_ns();
  const uint64_t up = now > state.created_ns() ? now - state.created_ns() : 0;
  const uint64_t busy = state.busy_total(index);
  // mW x us = 1e-9 J = 1e-6 mJ; in microseconds the products stay far
  // from overflowing for years of uptime.
  const uint64_t mw_us = uint64_t{kIdlePowerMw} * (up / 1000) +
                         uint64_t{kPowerLimitMw - kIdlePowerMw} * (std::min(busy, up) / 1000);
  *energy = mw_us / 1'000'000;
  return NVML_SUCCESS;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int* speed) {
  return fan_speed(device, speed);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int,
                                                           unsigned int* speed) {
  return fan_speed(device, speed);
}

// An idle GPU lowers its clocks for that reason alone; a busy one runs at
// its maximum (no power or thermal limit is ever reached).
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(
    nvmlDevice_t device, unsigned long long* clocksEventReasons) {
  return clocks_event_reasons(device, clocksEventReasons);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(
    nvmlDevice_t device, unsigned long long* clocksThrottleReasons) {
  return clocks_event_reasons(device, clocksThrottleReasons);
}
