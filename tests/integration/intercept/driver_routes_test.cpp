// Every route to the driver leads to gpulimit's hooks: a tenant capped at
// 1 GiB tries to hold 10 × 512 MiB of an 8 GiB simulated device through
// each way a program can reach the driver around symbol interposition
// (hostile_routes.cpp), and through a second interposer stacked with
// gpulimit (interposer_shim.cpp). What the device really holds is read
// from the simulator's NVML by a process without libgpulimit.so, while the
// tenant keeps what it got; it must stay within the cap.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "gpulimit/testing/process.h"
#include "gpulimit/testing/simulated_machine.h"
#include "gpulimit/testing/temporary_directory.h"

namespace {

using namespace std::chrono_literals;
using gpulimit::testing::Launch;
using gpulimit::testing::Process;
using gpulimit::testing::SimulatedMachine;
using gpulimit::testing::Stream;
using gpulimit::testing::TemporaryDirectory;

constexpr unsigned long long kGiB = 1ull << 30;
constexpr int kChunksUnderTheCap = 2;  // of 512 MiB

// A value of device_views' key=value line.
unsigned long long value_of(const std::string& line, const std::string& key) {
  const std::string needle = key + "=";
  size_t at = line.find(" " + needle);
  at = at == std::string::npos ? (line.starts_with(needle) ? 0 : at) : at + 1;
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << key << " in " << line;
    return ~0ull;
  }
  return std::stoull(line.substr(at + needle.size()));
}

class DriverRoutes : public testing::Test {
 protected:
  SimulatedMachine machine{"8G"};
  TemporaryDirectory ledgers;
  TemporaryDirectory scratch;

  // What device 0 holds now, as NVML says without gpulimit.
  unsigned long long device_used() {
    Launch launch;
    launch.argv = {DEVICE_VIEWS_PATH};
    launch.environment =
        gpulimit::testing::this_environment(machine.environment(), {"LD_PRELOAD="});
    launch.out = Stream::pipe();
    Process views(launch);
    const std::string out = views.read_stdout_to_end();
    EXPECT_EQ(views.wait().shell(), 0) << out;
    return value_of(out, "nvml0_used");
  }

  // Runs `argv` as the capped tenant, and checks the cap while it holds
  // what it got. `own_libcuda`: the program finds libcuda.so.1 along its
  // own RUNPATH, not the simulator's folder.
  void expect_capped(std::vector<std::string> argv, bool own_libcuda = false) {
    Launch launch;
    launch.argv = std::move(argv);
    gpulimit::testing::Variables env;
    for (auto& variable : machine.tenant_environment(ledgers.path(), "1G", "routes"))
      if (!own_libcuda || variable.first != "LD_LIBRARY_PATH") env.push_back(variable);
    env.emplace_back("GPULIMIT_TEST_DIR", scratch.path());
    launch.environment = gpulimit::testing::this_environment(
        env,
        own_libcuda ? std::vector<std::string>{"LD_LIBRARY_PATH="} : std::vector<std::string>{});
    launch.in = Stream::pipe();
    launch.out = Stream::pipe();
    launch.dies_with_test = true;
    Process tenant(launch);
    const std::optional<std::string> held = tenant.read_line(60s);
    ASSERT_TRUE(held.has_value()) << "the tenant said nothing; it ended "
                                  << (tenant.wait_for_exit(1s) ? tenant.exit_status()->shell()
                                                               : -1);
    ASSERT_TRUE(held->starts_with("held ")) << *held;
    EXPECT_LE(std::stoi(held->substr(5)), kChunksUnderTheCap);
    EXPECT_LE(device_used(), kGiB);
    tenant.close_stdin();
    EXPECT_EQ(tenant.wait().shell(), 0);
  }

  void expect_capped_route(const std::string& route) {
    expect_capped({HOSTILE_ROUTES_PATH, route});
  }

  // Runs a runpath route: the dependency must be found (answer 42).
  void expect_found_along_runpath(const std::string& route) {
    Launch launch;
    launch.argv = {HOSTILE_ROUTES_PATH, route};
    launch.environment = gpulimit::testing::this_environment(
        machine.tenant_environment(ledgers.path(), "1G", "routes"));
    launch.out = Stream::pipe();
    Process tenant(launch);
    const std::string out = tenant.read_stdout_to_end();
    EXPECT_EQ(tenant.wait().shell(), 0);
    EXPECT_EQ(out, "answer 42\n");
  }
};

// A library that links libcuda.so.1, loaded with RTLD_DEEPBIND, would look
// in its own dependencies (the driver) before the preloaded hooks.
TEST_F(DriverRoutes, DeepbindLibrary) {
  expect_capped_route("deepbind");
}
TEST_F(DriverRoutes, DeepbindLibraryBoundLazily) {
  expect_capped_route("deepbind-lazy");
}
TEST_F(DriverRoutes, DeepbindLibraryLookingUpItsDefaultScope) {
  expect_capped_route("deepbind-default-lookup");
}
// The C library's dlopen, reached around gpulimit's: through a handle of
// libc, and through a versioned lookup (glibc's dlvsym passes over
// unversioned definitions such as gpulimit's). The driver's own names have
// no version, so dlvsym finds none of them.
TEST_F(DriverRoutes, DeepbindThroughTheCLibrarysDlopenByHandle) {
  expect_capped_route("deepbind-through-libc-handle");
}
TEST_F(DriverRoutes, DeepbindThroughTheCLibrarysDlopenByVersion) {
  expect_capped_route("deepbind-through-dlvsym");
}
// ... and as the next dlopen after a library loaded after gpulimit.
TEST_F(DriverRoutes, DeepbindThroughTheNextDlopenOfALoadedLibrary) {
  expect_capped_route("deepbind-through-next-from-library");
}
// dlmopen: a namespace of its own, where LD_PRELOAD does not reach, with a
// second copy of the driver.
TEST_F(DriverRoutes, LibraryInANewNamespace) {
  expect_capped_route("dlmopen-library");
}
TEST_F(DriverRoutes, DriverInANewNamespace) {
  expect_capped_route("dlmopen-driver");
}
// Routes that symbol interposition closes already: kept as tests.
TEST_F(DriverRoutes, SymbolicLibrary) {
  expect_capped_route("symbolic");
}
TEST_F(DriverRoutes, DriverByAbsolutePath) {
  expect_capped_route("driver-by-path");
}
TEST_F(DriverRoutes, LibraryDependingOnTheDriverLookedUpByHandle) {
  expect_capped_route("dependent-handle");
}
// A copy of the driver's file under another name is a second driver object.
TEST_F(DriverRoutes, RenamedCopyOfTheDriver) {
  expect_capped_route("driver-copy");
}
TEST_F(DriverRoutes, NextDefinitionFromALoadedLibrary) {
  expect_capped_route("next-from-library");
}

// A second interposer that ships as libcuda.so.1 and forwards to the
// driver it looks up by handle: no recursion, and the cap holds.
TEST_F(DriverRoutes, InterposerForwardingToTheDriverByHandle) {
  expect_capped({INTERPOSED_WORKLOAD_PATH}, /*own_libcuda=*/true);
}

// dlopen and dlmopen keep the caller: a bare name is found along the RUNPATH
// of the library that asked, with or without RTLD_DEEPBIND.
TEST_F(DriverRoutes, DlopenSearchesTheCallersRunpath) {
  expect_found_along_runpath("runpath-dlopen");
}
TEST_F(DriverRoutes, DeepbindDlopenSearchesTheCallersRunpath) {
  expect_found_along_runpath("runpath-deepbind");
}
TEST_F(DriverRoutes, DlmopenSearchesTheCallersRunpath) {
  expect_found_along_runpath("runpath-dlmopen");
}

// Bad input to dlmopen: glibc's own error each time, and no namespace left
// behind by the guard.
TEST_F(DriverRoutes, FailedDlmopensSayWhyAndLeaveNoNamespaceBehind) {
  expect_found_along_runpath("runpath-failing-dlmopens");
}

}  // namespace
