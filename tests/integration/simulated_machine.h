// The programs the integration tests run on their simulated machines
// (gpulimit/testing/simulated_machine.h).
#pragma once

#include <string>

#include "gpulimit/testing/simulated_machine.h"
#include "workload_process.h"

namespace integration {

// Built by CMake (see CMakeLists.txt).
inline const std::string kAllocator = WORKLOAD_ALLOCATOR_PATH;
inline const std::string kSpinner = WORKLOAD_SPINNER_PATH;
// Test programs of this directory (see forking_tenant.cpp, device_views.cpp).
inline const std::string kForkingTenant = FORKING_TENANT_PATH;
inline const std::string kDeviceViews = DEVICE_VIEWS_PATH;
inline const std::string kLibrary = GPULIMIT_LIBRARY_PATH;

using gpulimit::testing::MachineShape;
using gpulimit::testing::SimulatedMachine;
using gpulimit::testing::TracedKernel;

}  // namespace integration
