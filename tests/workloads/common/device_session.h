// The device a workload runs on, with its primary context current on the
// calling thread: the context the CUDA runtime, and so nearly every
// application, uses.
#pragma once

#include <cuda.h>

#include "report_line.h"

namespace workloads {

class DeviceSession {
 public:
  DeviceSession() = default;
  DeviceSession(const DeviceSession&) = delete;
  DeviceSession& operator=(const DeviceSession&) = delete;
  ~DeviceSession();

  // cuInit, then device `ordinal`'s primary context, made current.
  CUresult open(int ordinal);

  CUdevice device() const { return device_; }
  // The primary context, for other threads to make current.
  CUcontext context() const { return context_; }
  int ordinal() const { return ordinal_; }

  // Adds what the driver says about itself and the device: driver_version,
  // device_name, device_total, cc, sms.
  CUresult describe(ReportLine& report) const;

 private:
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  int ordinal_ = -1;
  bool retained_ = false;
};

}  // namespace workloads
