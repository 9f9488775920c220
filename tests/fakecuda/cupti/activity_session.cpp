#include "activity_session.h"

#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace fakecuda::cupti {
namespace {

int64_t read_ns(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

size_t aligned(size_t size) {
  return (size + ACTIVITY_RECORD_ALIGNMENT - 1) / ACTIVITY_RECORD_ALIGNMENT *
         ACTIVITY_RECORD_ALIGNMENT;
}

}  // namespace

size_t record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return aligned(sizeof(CUpti_ActivityKernel10));
    case CUPTI_ACTIVITY_KIND_DEVICE:
      return aligned(sizeof(CUpti_ActivityDevice5));
    default:
      return 0;
  }
}

ActivitySession& ActivitySession::get() {
  static ActivitySession* session = new ActivitySession();  // never destroyed: used at exit
  return *session;
}

ActivitySession::ActivitySession()
    : clock_offset_ns_(read_ns(CLOCK_REALTIME) - read_ns(CLOCK_MONOTONIC)) {}

CUptiResult ActivitySession::register_callbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                CUpti_BuffersCallbackCompleteFunc completed) {
  if (!requested || !completed) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard lock(mu_);
  requested_ = requested;
  completed_ = completed;
  return CUPTI_SUCCESS;
}

CUptiResult ActivitySession::enable(CUpti_ActivityKind kind) {
  std::lock_guard lock(mu_);
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      kernels_enabled_ = true;
      kernel_kind_ = kind;
      return CUPTI_SUCCESS;
    case CUPTI_ACTIVITY_KIND_DEVICE:
      devices_enabled_ = true;
      return CUPTI_SUCCESS;
    default:
      return CUPTI_ERROR_NOT_SUPPORTED;  // not simulated
  }
}

CUptiResult ActivitySession::register_timestamp_callback(CUpti_TimestampCallbackFunc callback) {
  if (!callback) return CUPTI_ERROR_INVALID_PARAMETER;
  // A CUPTI older than the callback (before CUDA 12.?), for tests of the
  // tracer's calibration.
  if (const char* mode = std::getenv("FAKECUDA_CUPTI_TIMESTAMP_CALLBACK");
      mode && std::strcmp(mode, "unsupported") == 0)
    return CUPTI_ERROR_NOT_SUPPORTED;
  std::lock_guard lock(mu_);
  timestamp_callback_ = callback;
  clock_offset_ns_ = static_cast<int64_t>(callback()) - read_ns(CLOCK_MONOTONIC);
  return CUPTI_SUCCESS;
}

uint64_t ActivitySession::timestamp() {
  // With a callback the real CUPTI asks the client for every timestamp.
  if (CUpti_TimestampCallbackFunc callback = timestamp_callback_.load()) return callback();
  return on_cupti_clock(static_cast<uint64_t>(read_ns(CLOCK_MONOTONIC)));
}

uint64_t ActivitySession::on_cupti_clock(uint64_t monotonic_ns) const {
  return static_cast<uint64_t>(static_cast<int64_t>(monotonic_ns) + clock_offset_ns_.load());
}

void ActivitySession::complete_current() {
  if (!buffer_) return;
  uint8_t* buffer = buffer_;
  const size_t size = buffer_size_, used = buffer_used_;
  buffer_ = nullptr;
  buffer_size_ = buffer_used_ = 0;
  // After this the buffer is the client's again.
  completed_(nullptr, 0, buffer, size, used);
}

void ActivitySession::emit(const void* record, size_t size) {
  if (buffer_ && buffer_used_ + size > buffer_size_) complete_current();
  if (!buffer_) {
    uint8_t* buffer = nullptr;
    size_t buffer_size = 0, max_records = 0;
    requested_(&buffer, &buffer_size, &max_records);
    // A declined buffer, a misaligned or too small one: the record is lost,
    // and counted; an unusable buffer goes back to the client empty.
    if (!buffer || buffer_size < size ||
        reinterpret_cast<uintptr_t>(buffer) % ACTIVITY_RECORD_ALIGNMENT != 0) {
      ++dropped_;
      if (buffer) completed_(nullptr, 0, buffer, buffer_size, 0);
      return;
    }
    buffer_ = buffer;
    buffer_size_ = buffer_size;
    buffer_used_ = 0;
  }
  std::memcpy(buffer_ + buffer_used_, record, size);
  buffer_used_ += size;
}

CUptiResult ActivitySession::flush_all() {
  std::lock_guard lock(mu_);
  if (!requested_ || !completed_) return CUPTI_ERROR_INVALID_OPERATION;

  // The devices, once the program has initialised CUDA: before any kernel
  // record, as the driver knows its devices before it runs anything.
  if (!devices_reported_) {
    const std::vector<SimulatedDevice> devices = visible_devices();
    for (const SimulatedDevice& device : devices) {
      if (device.physical < 64) {
        ordinal_of_physical_[device.physical] = static_cast<uint32_t>(device.ordinal);
        ordinal_known_[device.physical] = true;
      }
      if (!devices_enabled_) continue;
      CUpti_ActivityDevice5 record;
      std::memset(&record, 0, sizeof record);
      record.kind = CUPTI_ACTIVITY_KIND_DEVICE;
      record.id = static_cast<uint32_t>(device.ordinal);
      record.uuid = device.uuid;
      record.name = names_.insert("FakeCUDA Simulated GPU").first->c_str();
      record.isCudaVisible = 1;
      emit(&record, record_size(CUPTI_ACTIVITY_KIND_DEVICE));
    }
    devices_reported_ = !devices.empty();
  }

  // Kernels of this process: getpid() now, so that a forked child reports
  // its own.
  for (const SimulatedKernel& kernel : trace_.new_kernels_of(getpid())) {
    if (!kernels_enabled_) continue;
    CUpti_ActivityKernel10 record;
    std::memset(&record, 0, sizeof record);
    record.kind = kernel_kind_;
    record.start = on_cupti_clock(kernel.start_ns);
    record.end = on_cupti_clock(kernel.end_ns);
    record.completed = record.end;
    const bool known = kernel.physical_device < 64 && ordinal_known_[kernel.physical_device];
    record.deviceId = known ? ordinal_of_physical_[kernel.physical_device] : kernel.physical_device;
    record.contextId = 1;
    record.streamId = static_cast<uint32_t>(kernel.stream);
    record.correlationId = next_correlation_id_++;
    record.name = names_.insert(kernel.name).first->c_str();
    record.queued = CUPTI_TIMESTAMP_UNKNOWN;
    record.submitted = CUPTI_TIMESTAMP_UNKNOWN;
    emit(&record, record_size(kernel_kind_));
  }
  complete_current();
  return CUPTI_SUCCESS;
}

}  // namespace fakecuda::cupti
