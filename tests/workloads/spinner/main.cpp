// spinner: launches spin kernels of a fixed duration through one launch path
// on one or more streams, for a number of kernels or a length of time, and
// reports how many ran and how much GPU time they took as one key=value line
// (see ../README.md).
#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include "command_line.h"
#include "cu_check.h"
#include "device_session.h"
#include "driver_api.h"
#include "launcher.h"
#include "report_line.h"
#include "spin_kernel.h"
#include "timed_streams.h"

namespace workloads {
namespace {

struct SpinnerOptions {
  LaunchKind launch = LaunchKind::kernel;
  uint64_t kernel_ns = 1'000'000;
  uint32_t streams = 1;
  double seconds = 0;     // > 0: launch for this long
  uint64_t kernels = 10;  // otherwise: launch this many kernels
  uint32_t batch = 1;
  DriverOptions driver;
};

using Clock = std::chrono::steady_clock;

uint64_t nanoseconds_since(Clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

// What the launch loop did.
struct SpinTally {
  uint64_t launches = 0;
  uint64_t kernels = 0;
  std::vector<uint64_t> stream_kernels;
};

// Launches round by round: in each round every stream gets a turn of --batch
// launches (one graph launch for graphs), at most kRoundsInFlight rounds ahead
// of its GPU. Stops at a kernel count, or once the time is up.
CUresult launch_loop(const SpinnerOptions& options, Launcher& launcher, TimedStreams& streams,
                     Clock::time_point start, SpinTally& tally) {
  const bool timed = options.seconds > 0;
  const auto time_is_up = [&] { return nanoseconds_since(start) >= options.seconds * 1e9; };
  const auto count_reached = [&] { return !timed && tally.kernels >= options.kernels; };
  const uint32_t launches_per_turn = launcher.kernels_per_launch() == 1 ? options.batch : 1;

  tally.stream_kernels.assign(options.streams, 0);
  for (uint64_t round = 0;; ++round) {
    for (size_t s = 0; s < options.streams; ++s) {
      if (count_reached() || (timed && time_is_up())) return CUDA_SUCCESS;
      RETURN_IF_ERROR(streams.wait_for_room(s, round));
      for (uint32_t i = 0; i < launches_per_turn && !count_reached(); ++i) {
        RETURN_IF_ERROR(launcher.launch(s));
        ++tally.launches;
        tally.kernels += launcher.kernels_per_launch();
        tally.stream_kernels[s] += launcher.kernels_per_launch();
      }
      RETURN_IF_ERROR(streams.end_round(s, round));
    }
  }
}

CUresult spin(const SpinnerOptions& options, ReportLine& report) {
  DeviceSession session;
  RETURN_IF_ERROR(session.open(options.driver.device));
  SpinKernel kernel;
  RETURN_IF_ERROR(kernel.load());

  // Every kernel adds one here; on a real GPU it proves they all ran. The
  // simulator does not execute kernel code, so there it stays 0.
  CUdeviceptr counter = 0;
  CU_CHECK(cuMemAlloc(&counter, sizeof(unsigned long long)));
  CU_CHECK(cuMemsetD32(counter, 0, sizeof(unsigned long long) / sizeof(uint32_t)));
  // The memset is ordered on the default stream, which the non-blocking
  // streams below do not wait for.
  CU_CHECK(cuStreamSynchronize(nullptr));
  SpinArguments arguments;
  arguments.duration_ns = options.kernel_ns;
  arguments.counter = counter;

  SpinTally tally;
  std::vector<uint64_t> gpu_ns;
  uint64_t wall_ns = 0;
  {
    TimedStreams streams;
    RETURN_IF_ERROR(streams.create(options.streams));
    LaunchSetup setup;
    setup.device = session.device();
    setup.function = kernel.function();
    setup.kernel_params = arguments.kernel_params();
    setup.streams = streams.streams();
    setup.graph_kernels = options.batch;
    std::unique_ptr<Launcher> launcher;
    RETURN_IF_ERROR(make_launcher(options.launch, setup, launcher));

    const Clock::time_point start = Clock::now();
    RETURN_IF_ERROR(streams.start());
    RETURN_IF_ERROR(launch_loop(options, *launcher, streams, start, tally));
    RETURN_IF_ERROR(streams.finish(gpu_ns));
    wall_ns = nanoseconds_since(start);
    // Every stream is idle by now; this reports any error a kernel raised
    // asynchronously, which the events alone would not.
    CU_CHECK(cuCtxSynchronize());
  }

  unsigned long long kernel_writes = 0;
  CU_CHECK(cuMemcpyDtoH(&kernel_writes, counter, sizeof(kernel_writes)));
  CU_CHECK(cuMemFree(counter));

  report.add("workload", "spinner")
      .add("launch", to_string(options.launch))
      .add("access", to_string(options.driver.access))
      .add("stream_mode", to_string(options.driver.stream_mode))
      .add("device", session.ordinal())
      .add("kernel_ns", options.kernel_ns)
      .add("streams", options.streams)
      .add("batch", options.batch)
      .add("launches", tally.launches)
      .add("kernels", tally.kernels)
      .add("stream_kernels", tally.stream_kernels)
      .add("stream_gpu_ns", gpu_ns)
      .add("gpu_ns", std::accumulate(gpu_ns.begin(), gpu_ns.end(), uint64_t{0}))
      .add("wall_ns", wall_ns)
      .add("kernel_writes", kernel_writes);
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace workloads

int main(int argc, char** argv) {
  using namespace workloads;
  SpinnerOptions options;
  CLI::App app(
      "Launches spin kernels of a fixed duration through one launch path on one or more "
      "streams, then prints one line of key=value pairs (see tests/workloads/README.md): "
      "kernels run, wall time, and GPU time measured with events on each stream.",
      "spinner");
  app.add_option_function<std::string>(
         "--launch",
         [&options](const std::string& text) { options.launch = *parse_launch_kind(text); },
         "Launch path: kernel (cuLaunchKernel), kernel-ex (cuLaunchKernelEx), cooperative "
         "(cuLaunchCooperativeKernel), graph-capture (--batch captured launches per graph, run "
         "with cuGraphLaunch), graph-explicit (--batch kernel nodes added with "
         "cuGraphAddKernelNode, run with cuGraphLaunch)")
      ->check(
          CLI::IsMember({"kernel", "kernel-ex", "cooperative", "graph-capture", "graph-explicit"}))
      ->default_str("kernel");
  app.add_option("--kernel-ns", options.kernel_ns,
                 "How long each kernel occupies the GPU, in nanoseconds")
      ->capture_default_str();
  app.add_option("--streams", options.streams, "Streams to launch on, round robin")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  CLI::Option* seconds =
      app.add_option("--seconds", options.seconds,
                     "Keep launching for this many seconds of wall time, then wait for the GPU")
          ->check(CLI::Range(0.001, 86400.0));
  app.add_option("--kernels", options.kernels,
                 "Launch this many kernels in all (graphs: whole graphs, until at least this "
                 "many)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000'000}))
      ->excludes(seconds)
      ->capture_default_str();
  app.add_option("--batch", options.batch,
                 "Kernels per graph; for the other paths, launches per stream before moving to "
                 "the next stream")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  add_driver_options(app, options.driver);

  if (std::optional<int> status = parse_command_line(app, argc, argv)) return *status;

  std::string error;
  if (!load_driver_api(options.driver.access, options.driver.stream_mode, error)) {
    report_error(error);
    return kExitFailure;
  }
  ReportLine report;
  if (spin(options, report) != CUDA_SUCCESS) return kExitFailure;
  report.print();
  return kExitOk;
}
