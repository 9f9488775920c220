#include "device_session.h"

#include <string>

#include "cu_check.h"

namespace workloads {

DeviceSession::~DeviceSession() {
  if (retained_) CU(cuDevicePrimaryCtxRelease)(device_);
}

CUresult DeviceSession::open(int ordinal) {
  CU_CHECK(cuInit(0));
  int count = 0;
  CU_CHECK(cuDeviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count) {
    report_error("--device " + std::to_string(ordinal) + ": the driver reports " +
                 std::to_string(count) + " device(s)");
    return CUDA_ERROR_INVALID_DEVICE;
  }
  CU_CHECK(cuDeviceGet(&device_, ordinal));
  CUcontext context = nullptr;
  CU_CHECK(cuDevicePrimaryCtxRetain(&context, device_));
  retained_ = true;
  CU_CHECK(cuCtxSetCurrent(context));
  context_ = context;
  ordinal_ = ordinal;
  return CUDA_SUCCESS;
}

CUresult DeviceSession::describe(ReportLine& report) const {
  int driver_version = 0;
  CU_CHECK(cuDriverGetVersion(&driver_version));
  char name[256] = {};
  CU_CHECK(cuDeviceGetName(name, sizeof(name), device_));
  size_t total = 0;
  CU_CHECK(cuDeviceTotalMem(&total, device_));
  int major = 0, minor = 0, sms = 0;
  CU_CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_));
  CU_CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_));
  CU_CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device_));
  report.add("driver_version", driver_version)
      .add("device_name", name)
      .add("device_total", total)
      .add("cc", std::to_string(major) + "." + std::to_string(minor))
      .add("sms", sms);
  return CUDA_SUCCESS;
}

}  // namespace workloads
