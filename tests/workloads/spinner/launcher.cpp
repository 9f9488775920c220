#include "launcher.h"

namespace workloads {
namespace {

struct KindName {
  LaunchKind kind;
  std::string_view name;
};

constexpr KindName kKindNames[] = {
    {LaunchKind::kernel, "kernel"},
    {LaunchKind::kernel_ex, "kernel-ex"},
    {LaunchKind::cooperative, "cooperative"},
    {LaunchKind::graph_capture, "graph-capture"},
    {LaunchKind::graph_explicit, "graph-explicit"},
};

}  // namespace

std::string_view to_string(LaunchKind kind) {
  for (const KindName& entry : kKindNames) {
    if (entry.kind == kind) return entry.name;
  }
  return "?";
}

std::optional<LaunchKind> parse_launch_kind(std::string_view text) {
  for (const KindName& entry : kKindNames) {
    if (entry.name == text) return entry.kind;
  }
  return std::nullopt;
}

CUresult make_launcher(LaunchKind kind, const LaunchSetup& setup, std::unique_ptr<Launcher>& out) {
  switch (kind) {
    case LaunchKind::kernel:
      return make_kernel_launcher(setup, out);
    case LaunchKind::kernel_ex:
      return make_kernel_ex_launcher(setup, out);
    case LaunchKind::cooperative:
      return make_cooperative_launcher(setup, out);
    case LaunchKind::graph_capture:
      return make_captured_graph_launcher(setup, out);
    case LaunchKind::graph_explicit:
      return make_explicit_graph_launcher(setup, out);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace workloads
