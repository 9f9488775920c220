// One way of putting spin kernels on a stream. Each --launch of the spinner
// is one implementation.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace workloads {

enum class LaunchKind {
  kernel,          // cuLaunchKernel
  kernel_ex,       // cuLaunchKernelEx
  cooperative,     // cuLaunchCooperativeKernel
  graph_capture,   // a graph captured from cuLaunchKernel calls, run with cuGraphLaunch
  graph_explicit,  // a graph built node by node (cuGraphAddKernelNode), run with cuGraphLaunch
};

std::string_view to_string(LaunchKind kind);
std::optional<LaunchKind> parse_launch_kind(std::string_view text);

// What every launch runs: the spin kernel with its arguments, one block of
// one thread. The kernel's duration does not depend on its size, and one
// block always fits a cooperative launch.
struct LaunchSetup {
  CUdevice device = 0;
  CUfunction function = nullptr;
  void** kernel_params = nullptr;  // valid for the launcher's lifetime
  std::vector<CUstream> streams;
  uint32_t graph_kernels = 1;  // kernels in each graph (--batch)
};

class Launcher {
 public:
  virtual ~Launcher() = default;

  // Kernels that one launch() runs: 1, or a graph's kernel count.
  virtual uint32_t kernels_per_launch() const = 0;

  // Enqueues one launch on setup.streams[stream_index].
  virtual CUresult launch(size_t stream_index) = 0;
};

// Builds whatever the kind needs up front (graphs: one executable graph per
// stream, so that streams run their graphs concurrently).
CUresult make_launcher(LaunchKind kind, const LaunchSetup& setup, std::unique_ptr<Launcher>& out);

CUresult make_kernel_launcher(const LaunchSetup& setup, std::unique_ptr<Launcher>& out);
CUresult make_kernel_ex_launcher(const LaunchSetup& setup, std::unique_ptr<Launcher>& out);
CUresult make_cooperative_launcher(const LaunchSetup& setup, std::unique_ptr<Launcher>& out);
CUresult make_captured_graph_launcher(const LaunchSetup& setup, std::unique_ptr<Launcher>& out);
CUresult make_explicit_graph_launcher(const LaunchSetup& setup, std::unique_ptr<Launcher>& out);

}  // namespace workloads
