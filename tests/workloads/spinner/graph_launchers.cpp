// Graphs of --batch spin kernels, one executable graph per stream, each run
// with one cuGraphLaunch: a single call that executes many kernels, which a
// limiter that only watches kernel launches never sees.
#include <vector>

#include "cu_check.h"
#include "launcher.h"

namespace workloads {
namespace {

class GraphLauncher final : public Launcher {
 public:
  GraphLauncher(const LaunchSetup& setup, std::vector<CUgraphExec> executables)
      : setup_(setup), executables_(std::move(executables)) {}

  ~GraphLauncher() override {
    for (CUgraphExec executable : executables_)
      CU(cuGraphExecDestroy)(executable);
  }

  uint32_t kernels_per_launch() const override { return setup_.graph_kernels; }

  CUresult launch(size_t stream_index) override {
    CU_CHECK(cuGraphLaunch(executables_[stream_index], setup_.streams[stream_index]));
    return CUDA_SUCCESS;
  }

 private:
  const LaunchSetup& setup_;
  std::vector<CUgraphExec> executables_;
};

// Instantiates `graph` and destroys it: only the executable graph is kept.
CUresult instantiate(CUgraph graph, CUgraphExec& executable) {
  const CUresult result = CU(cuGraphInstantiateWithFlags)(&executable, graph, 0);
  CU(cuGraphDestroy)(graph);
  if (result != CUDA_SUCCESS)
    report_failed_call("cuGraphInstantiateWithFlags", result, __FILE_NAME__, __LINE__);
  return result;
}

// Captures graph_kernels launches on `stream`. Global capture mode, the
// CUDA runtime's default: any unsafe call on this thread during the capture
// (a synchronisation, say, by an interposer) invalidates it.
CUresult capture(const LaunchSetup& setup, CUstream stream, CUgraph& graph) {
  CU_CHECK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUresult launched = CUDA_SUCCESS;
  for (uint32_t i = 0; i < setup.graph_kernels && launched == CUDA_SUCCESS; ++i) {
    launched = CU(cuLaunchKernel)(setup.function, 1, 1, 1, 1, 1, 1, 0, stream, setup.kernel_params,
                                  nullptr);
  }
  // End the capture even after a failed launch, so the stream is usable again.
  const CUresult ended = CU(cuStreamEndCapture)(stream, &graph);
  if (launched != CUDA_SUCCESS) {
    report_failed_call("cuLaunchKernel (capturing)", launched, __FILE_NAME__, __LINE__);
    if (ended == CUDA_SUCCESS) CU(cuGraphDestroy)(graph);
    return launched;
  }
  if (ended != CUDA_SUCCESS) {
    report_failed_call("cuStreamEndCapture", ended, __FILE_NAME__, __LINE__);
    return ended;
  }
  return CUDA_SUCCESS;
}

// graph_kernels kernel nodes in a chain, each depending on the one before,
// as a captured stream orders them.
CUresult build(const LaunchSetup& setup, CUgraph& graph) {
  CU_CHECK(cuGraphCreate(&graph, 0));
  CUDA_KERNEL_NODE_PARAMS_v2 params = {};
  params.func = setup.function;
  params.gridDimX = params.gridDimY = params.gridDimZ = 1;
  params.blockDimX = params.blockDimY = params.blockDimZ = 1;
  params.kernelParams = setup.kernel_params;
  CUgraphNode previous = nullptr;
  for (uint32_t i = 0; i < setup.graph_kernels; ++i) {
    CUgraphNode node = nullptr;
    const CUresult result = CU(cuGraphAddKernelNode)(&node, graph, previous ? &previous : nullptr,
                                                     previous ? 1 : 0, &params);
    if (result != CUDA_SUCCESS) {
      report_failed_call("cuGraphAddKernelNode", result, __FILE_NAME__, __LINE__);
      CU(cuGraphDestroy)(graph);
      return result;
    }
    previous = node;
  }
  return CUDA_SUCCESS;
}

enum class GraphSource { captured, built };

CUresult make_graph_launcher(GraphSource source, const LaunchSetup& setup,
                             std::unique_ptr<Launcher>& out) {
  std::vector<CUgraphExec> executables;
  auto destroy_made = [&executables] {
    for (CUgraphExec executable : executables)
      CU(cuGraphExecDestroy)(executable);
  };
  for (CUstream stream : setup.streams) {
    CUgraph graph = nullptr;
    CUresult result =
        source == GraphSource::captured ? capture(setup, stream, graph) : build(setup, graph);
    CUgraphExec executable = nullptr;
    if (result == CUDA_SUCCESS) result = instantiate(graph, executable);
    if (result != CUDA_SUCCESS) {
      destroy_made();
      return result;
    }
    executables.push_back(executable);
  }
  out = std::make_unique<GraphLauncher>(setup, std::move(executables));
  return CUDA_SUCCESS;
}

}  // namespace

CUresult make_captured_graph_launcher(const LaunchSetup& setup, std::unique_ptr<Launcher>& out) {
  return make_graph_launcher(GraphSource::captured, setup, out);
}

CUresult make_explicit_graph_launcher(const LaunchSetup& setup, std::unique_ptr<Launcher>& out) {
  return make_graph_launcher(GraphSource::built, setup, out);
}

}  // namespace workloads
