// Libraries and kernels (cuLibrary*, cuKernel*), lazy and eager loading, a
// CUkernel wherever a CUfunction goes, the JIT linker, and how long kernels
// occupy the device.
#include <cstring>
#include <fstream>
#include <sstream>

#include "support.h"

namespace fakecuda::test {
namespace {

constexpr size_t kMiB = 1ull << 20;
constexpr unsigned long long kMs = 1'000'000;
const char* const kScale = "_Z5scalePffi4Pairc";

std::string image_path(const std::string& name) {
  return std::string(FAKECUDA_IMAGES) + "/" + name;
}

std::string read_image(const std::string& name) {
  std::ifstream in(image_path(name), std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

class Libraries : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = init_primary(0);
    fatbin_ = read_image("kernels_zstd.fatbin");
    baseline_ = free_memory();
  }
  size_t taken() { return baseline_ - free_memory(); }
  CUlibrary load() {
    CUlibrary library = nullptr;
    EXPECT_CU(
        cuLibraryLoadData(&library, fatbin_.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    return library;
  }
  CUkernel kernel(CUlibrary library, const char* name) {
    CUkernel k = nullptr;
    EXPECT_CU(cuLibraryGetKernel(&k, library, name));
    return k;
  }
  // Device time of what `launch` enqueues on `stream`.
  template <typename Launch>
  float timed(CUstream stream, Launch launch) {
    CUevent start = nullptr, end = nullptr;
    EXPECT_CU(cuEventCreate(&start, 0));
    EXPECT_CU(cuEventCreate(&end, 0));
    EXPECT_CU(cuEventRecord(start, stream));
    launch();
    EXPECT_CU(cuEventRecord(end, stream));
    EXPECT_CU(cuEventSynchronize(end));
    float ms = 0;
    EXPECT_CU(cuEventElapsedTime(&ms, start, end));
    EXPECT_CU(cuEventDestroy_v2(start));
    EXPECT_CU(cuEventDestroy_v2(end));
    return ms;
  }
  CUcontext ctx_ = nullptr;
  std::string fatbin_;
  size_t baseline_ = 0;
};

TEST_F(Libraries, LazyLoadingChargesAtFirstUseInAContext) {
  CUmoduleLoadingMode mode;
  ASSERT_CU(cuModuleGetLoadingMode(&mode));
  EXPECT_EQ(mode, CU_MODULE_LAZY_LOADING) << "the real driver's default";
  CUlibrary library = load();
  EXPECT_EQ(taken(), 0u) << "a library belongs to no context until used";
  unsigned count = 0;
  ASSERT_CU(cuLibraryGetKernelCount(&count, library));
  ASSERT_EQ(count, 4u);
  CUkernel kernels[4] = {};
  ASSERT_CU(cuLibraryEnumerateKernels(kernels, 4, library));
  CUkernel scale = kernel(library, kScale);
  EXPECT_NE(std::find(std::begin(kernels), std::end(kernels), scale), std::end(kernels));
  CUkernel missing = nullptr;
  EXPECT_EQ(cuLibraryGetKernel(&missing, library, "scale"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(taken(), 0u);

  CUfunction f = nullptr, again = nullptr;
  ASSERT_CU(cuKernelGetFunction(&f, scale));
  const size_t charged = taken();
  EXPECT_GE(charged, 2 * kMiB) << "the module is loaded into this context now";
  ASSERT_CU(cuKernelGetFunction(&again, scale));
  EXPECT_EQ(again, f);
  EXPECT_EQ(taken(), charged);
  CUmodule module = nullptr, owner = nullptr;
  ASSERT_CU(cuLibraryGetModule(&module, library));
  ASSERT_CU(cuFuncGetModule(&owner, f));
  EXPECT_EQ(owner, module);
  ASSERT_CU(cuModuleGetFunctionCount(&count, module));
  EXPECT_EQ(count, 4u);
  EXPECT_EQ(cuModuleUnload(module), CUDA_ERROR_NOT_PERMITTED) << "the library owns it";

  ASSERT_CU(cuLibraryUnload(library));
  EXPECT_EQ(taken(), 0u);
  const char* name = nullptr;
  EXPECT_EQ(cuKernelGetName(&name, scale), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLibraryUnload(library), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(scale), 1, 1, 1, 1, 1, 1, 0, nullptr,
                           nullptr, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(Libraries, LoadFromFileAndArgumentChecks) {
  CUlibrary library = nullptr;
  ASSERT_CU(cuLibraryLoadFromFile(&library, image_path("kernels.cubin").c_str(), nullptr, nullptr,
                                  0, nullptr, nullptr, 0));
  ASSERT_CU(cuLibraryUnload(library));
  EXPECT_EQ(cuLibraryLoadFromFile(&library, image_path("absent").c_str(), nullptr, nullptr, 0,
                                  nullptr, nullptr, 0),
            CUDA_ERROR_FILE_NOT_FOUND);
  EXPECT_EQ(cuLibraryLoadData(nullptr, fatbin_.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLibraryLoadData(&library, nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLibraryLoadData(&library, fatbin_.data(), nullptr, nullptr, 0, nullptr, nullptr, 1),
            CUDA_ERROR_INVALID_VALUE);
  CUlibraryOption option = CU_LIBRARY_BINARY_IS_PRESERVED;
  void* value = nullptr;
  ASSERT_CU(cuLibraryLoadData(&library, fatbin_.data(), nullptr, nullptr, 0, &option, &value, 1));
  ASSERT_CU(cuLibraryUnload(library));
  option = CU_LIBRARY_NUM_OPTIONS;
  EXPECT_EQ(cuLibraryLoadData(&library, fatbin_.data(), nullptr, nullptr, 0, &option, &value, 1),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLibraryLoadData(&library, "garbage", nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(taken(), 0u);
}

TEST_F(Libraries, GlobalsAndManagedVariables) {
  CUlibrary library = load();
  CUdeviceptr table = 0, counter = 0;
  size_t bytes = 0;
  ASSERT_CU(cuLibraryGetGlobal(&table, &bytes, library, "table"));
  EXPECT_EQ(bytes, 112u);
  EXPECT_GE(taken(), 2 * kMiB) << "placing the variable loaded the module";
  int values[28];
  ASSERT_CU(cuMemcpyDtoH_v2(values, table, sizeof(values)));
  EXPECT_EQ(values[0], 1);
  EXPECT_EQ(values[9], 10);
  EXPECT_EQ(values[10], 0);
  CUmodule module = nullptr;
  CUdeviceptr same = 0;
  ASSERT_CU(cuLibraryGetModule(&module, library));
  ASSERT_CU(cuModuleGetGlobal_v2(&same, nullptr, module, "table"));
  EXPECT_EQ(same, table);
  ASSERT_CU(cuLibraryGetManaged(&counter, &bytes, library, "counter"));
  EXPECT_EQ(bytes, 4u);
  int seven = 0;
  ASSERT_CU(cuMemcpyDtoH_v2(&seven, counter, 4));
  EXPECT_EQ(seven, 7);
  EXPECT_EQ(cuLibraryGetManaged(&counter, &bytes, library, "table"), CUDA_ERROR_NOT_FOUND)
      << "not __managed__";
  EXPECT_EQ(cuLibraryGetGlobal(&table, &bytes, library, "absent"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuLibraryGetGlobal(&table, &bytes, library, nullptr), CUDA_ERROR_INVALID_VALUE);
  void* fn = nullptr;
  EXPECT_EQ(cuLibraryGetUnifiedFunction(&fn, library, "spin_image"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuLibraryGetUnifiedFunction(nullptr, library, "x"), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuLibraryUnload(library));
  EXPECT_EQ(cuLibraryGetGlobal(&table, &bytes, library, "table"), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(Libraries, KernelQueriesAndAttributesPerDevice) {
  CUlibrary library = load();
  CUkernel scale = kernel(library, kScale);
  const char* name = nullptr;
  ASSERT_CU(cuKernelGetName(&name, scale));
  EXPECT_STREQ(name, kScale);
  CUlibrary owner = nullptr;
  ASSERT_CU(cuKernelGetLibrary(&owner, scale));
  EXPECT_EQ(owner, library);
  size_t offset = 0, size = 0;
  ASSERT_CU(cuKernelGetParamInfo(scale, 3, &offset, &size));
  EXPECT_EQ(offset, 16u);
  EXPECT_EQ(size, 24u);
  EXPECT_EQ(cuKernelGetParamInfo(scale, 5, &offset, &size), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(taken(), 0u) << "queries load nothing";

  int value = 0;
  const auto shared = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
  ASSERT_CU(cuKernelGetAttribute(&value, shared, scale, 0));
  EXPECT_EQ(value, 48 << 10);
  ASSERT_CU(cuKernelSetAttribute(shared, 100 << 10, scale, 0));
  ASSERT_CU(cuKernelGetAttribute(&value, shared, scale, 0));
  EXPECT_EQ(value, 100 << 10);
  ASSERT_CU(cuKernelGetAttribute(&value, shared, scale, 1));
  EXPECT_EQ(value, 48 << 10) << "attributes are per device";
  CUfunction f = nullptr;
  ASSERT_CU(cuKernelGetFunction(&f, scale));
  ASSERT_CU(cuFuncGetAttribute(&value, shared, f));
  EXPECT_EQ(value, 100 << 10) << "the context's function has the device's attributes";
  ASSERT_CU(cuKernelSetAttribute(shared, 64 << 10, scale, 0));
  ASSERT_CU(cuFuncGetAttribute(&value, shared, f));
  EXPECT_EQ(value, 64 << 10) << "and follows them";
  EXPECT_EQ(cuKernelSetAttribute(shared, 300 << 10, scale, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_NUM_REGS, 8, scale, 0), CUDA_ERROR_INVALID_VALUE)
      << "read-only";
  EXPECT_EQ(cuKernelGetAttribute(&value, shared, scale, 7), CUDA_ERROR_INVALID_DEVICE);
  ASSERT_CU(cuKernelSetCacheConfig(scale, CU_FUNC_CACHE_PREFER_SHARED, 0));
  EXPECT_EQ(cuKernelSetCacheConfig(scale, static_cast<CUfunc_cache>(9), 0),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuLibraryUnload(library));
}

// Every entry point that takes a CUfunction takes a CUkernel too.
TEST_F(Libraries, KernelHandleWorksWhereverAFunctionDoes) {
  CUlibrary library = load();
  const auto spin = reinterpret_cast<CUfunction>(kernel(library, "spin_image"));
  CUstream stream = nullptr;
  ASSERT_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  unsigned long long ns = 2 * kMs;
  void* params[] = {&ns};
  // The first launch loads the library into the context.
  const float first = timed(stream, [&] {
    ASSERT_CU(cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr));
  });
  EXPECT_GE(first, 2.0f) << "it is the timed kernel";
  EXPECT_GE(taken(), 2 * kMiB);

  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  config.hStream = stream;
  const float all = timed(stream, [&] {
    ASSERT_CU(cuLaunchKernel_ptsz(spin, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
    ASSERT_CU(cuLaunchKernelEx(&config, spin, params, nullptr));
    ASSERT_CU(cuLaunchKernelEx_ptsz(&config, spin, params, nullptr));
    ASSERT_CU(cuLaunchCooperativeKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, params));
    ASSERT_CU(cuLaunchCooperativeKernel_ptsz(spin, 1, 1, 1, 1, 1, 1, 0, stream, params));
  });
  EXPECT_GE(all, 10.0f);

  // Graph nodes: v1 with the kernel as `func`; v2 with `kern` (and `func` NULL).
  CUgraph graph = nullptr;
  ASSERT_CU(cuGraphCreate(&graph, 0));
  CUDA_KERNEL_NODE_PARAMS_v1 v1{};
  v1.func = spin;
  v1.gridDimX = v1.gridDimY = v1.gridDimZ = 1;
  v1.blockDimX = v1.blockDimY = v1.blockDimZ = 1;
  v1.kernelParams = params;
  CUgraphNode a = nullptr, b = nullptr;
  ASSERT_CU(cuGraphAddKernelNode(&a, graph, nullptr, 0, &v1));
  CUDA_KERNEL_NODE_PARAMS v2{};
  v2.kern = reinterpret_cast<CUkernel>(spin);
  v2.gridDimX = v2.gridDimY = v2.gridDimZ = 1;
  v2.blockDimX = v2.blockDimY = v2.blockDimZ = 1;
  v2.kernelParams = params;
  ASSERT_CU(cuGraphAddKernelNode_v2(&b, graph, &a, 1, &v2));
  unsigned long long longer = 5 * kMs;
  void* longer_params[] = {&longer};
  v2.kernelParams = longer_params;
  v2.ctx = ctx_;
  ASSERT_CU(cuGraphKernelNodeSetParams_v2(b, &v2));
  v1.kernelParams = longer_params;
  ASSERT_CU(cuGraphKernelNodeSetParams(a, &v1));
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  const float graphed = timed(stream, [&] { ASSERT_CU(cuGraphLaunch(exec, stream)); });
  EXPECT_GE(graphed, 10.0f) << "both nodes took the set parameters";
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));

  // A launch captured into a graph.
  ASSERT_CU(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
  ASSERT_CU(cuStreamEndCapture(stream, &graph));
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  const float captured = timed(stream, [&] { ASSERT_CU(cuGraphLaunch(exec, stream)); });
  EXPECT_GE(captured, 2.0f);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));

  // Function queries and settings.
  int value = 0;
  ASSERT_CU(cuFuncSetAttribute(spin, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 96 << 10));
  ASSERT_CU(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, spin));
  EXPECT_EQ(value, 96 << 10);
  ASSERT_CU(cuFuncSetCacheConfig(spin, CU_FUNC_CACHE_PREFER_L1));
  size_t offset = 1, size = 0;
  ASSERT_CU(cuFuncGetParamInfo(spin, 0, &offset, &size));
  EXPECT_EQ(offset, 0u);
  EXPECT_EQ(size, 8u);
  const char* name = nullptr;
  ASSERT_CU(cuFuncGetName(&name, spin));
  EXPECT_STREQ(name, "spin_image");

  ASSERT_CU(cuStreamDestroy_v2(stream));
  ASSERT_CU(cuLibraryUnload(library));
}

// CU_LIBRARY_BINARY_IS_PRESERVED is a flag: cuBLASLt passes it with no array
// of values (and failed to load its kernels while that was refused).
TEST_F(Libraries, APreservedBinaryNeedsNoOptionValue) {
  CUlibraryOption preserved = CU_LIBRARY_BINARY_IS_PRESERVED;
  CUlibrary library = nullptr;
  ASSERT_CU(
      cuLibraryLoadData(&library, fatbin_.data(), nullptr, nullptr, 0, &preserved, nullptr, 1));
  ASSERT_CU(cuLibraryUnload(library));
  CUlibraryOption table = CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE;
  EXPECT_EQ(cuLibraryLoadData(&library, fatbin_.data(), nullptr, nullptr, 0, &table, nullptr, 1),
            CUDA_ERROR_INVALID_VALUE);
}

// cuBLAS sizes its kernels with occupancy queries on CUkernel handles.
TEST_F(Libraries, OccupancyQueriesTakeAKernelHandle) {
  CUlibrary library = load();
  const auto spin = reinterpret_cast<CUfunction>(kernel(library, "spin_image"));
  size_t shared = 0;
  ASSERT_CU(cuOccupancyAvailableDynamicSMemPerBlock(&shared, spin, 1, 128));
  EXPECT_GT(shared, 0u);
  int blocks = 0;
  ASSERT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, spin, 128, 0));
  EXPECT_GT(blocks, 0);
  ASSERT_CU(cuLibraryUnload(library));
}

// The launch a kernel node was given, or captured, comes back from
// cuGraphKernelNodeGetParams with the arguments' values; an executable
// graph's copy of the node can be given another launch.
TEST_F(Libraries, KernelNodesDescribeTheirLaunchAndCanBeChangedInTheExecutableGraph) {
  CUlibrary library = load();
  const auto spin = reinterpret_cast<CUfunction>(kernel(library, "spin_image"));
  CUstream stream = nullptr;
  ASSERT_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  unsigned long long ns = 3 * kMs;
  void* params[] = {&ns};
  ASSERT_CU(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(cuLaunchKernel(spin, 2, 1, 1, 64, 1, 1, 0, stream, params, nullptr));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream, &graph));
  ns = 0;  // the driver copied the argument at the launch
  CUgraphNode node = nullptr;
  size_t count = 1;
  ASSERT_CU(cuGraphGetNodes(graph, &node, &count));
  ASSERT_EQ(count, 1u);

  CUDA_KERNEL_NODE_PARAMS_v1 v1{};
  ASSERT_CU(cuGraphKernelNodeGetParams(node, &v1));
  EXPECT_EQ(v1.func, spin);
  EXPECT_EQ(v1.gridDimX, 2u);
  EXPECT_EQ(v1.blockDimX, 64u);
  ASSERT_NE(v1.kernelParams, nullptr);
  EXPECT_EQ(*static_cast<unsigned long long*>(v1.kernelParams[0]), 3 * kMs);
  CUDA_KERNEL_NODE_PARAMS v2{};
  ASSERT_CU(cuGraphKernelNodeGetParams_v2(node, &v2));
  EXPECT_EQ(v2.func, nullptr);
  EXPECT_EQ(v2.kern, reinterpret_cast<CUkernel>(spin));

  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  EXPECT_GE(timed(stream, [&] { ASSERT_CU(cuGraphLaunch(exec, stream)); }), 3.0f);
  unsigned long long longer = 9 * kMs;
  void* longer_params[] = {&longer};
  v1.kernelParams = longer_params;
  ASSERT_CU(cuGraphExecKernelNodeSetParams(exec, node, &v1));
  EXPECT_GE(timed(stream, [&] { ASSERT_CU(cuGraphLaunch(exec, stream)); }), 9.0f);
  // The graph itself keeps its own launch.
  ASSERT_CU(cuGraphKernelNodeGetParams(node, &v1));
  EXPECT_EQ(*static_cast<unsigned long long*>(v1.kernelParams[0]), 3 * kMs);
  EXPECT_EQ(cuGraphKernelNodeGetParams(nullptr, &v1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
  ASSERT_CU(cuStreamDestroy_v2(stream));
}

TEST_F(Libraries, FirstLaunchFailsWhenTheDeviceIsFull) {
  CUlibrary library = load();
  const auto spin = reinterpret_cast<CUfunction>(kernel(library, "spin_image"));
  CUdeviceptr filler = 0;
  ASSERT_CU(cuMemAlloc_v2(&filler, free_memory() / kMiB * kMiB - kMiB));
  unsigned long long ns = 1000;
  void* params[] = {&ns};
  EXPECT_EQ(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr),
            CUDA_ERROR_OUT_OF_MEMORY)
      << "lazy loading takes the module's memory at the first launch";
  CUfunction f = nullptr;
  EXPECT_EQ(cuKernelGetFunction(&f, reinterpret_cast<CUkernel>(spin)), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_CU(cuMemFree_v2(filler));
  ASSERT_CU(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuLibraryUnload(library));
  EXPECT_EQ(taken(), 0u);
}

TEST_F(Libraries, KernelNeedsAContext) {
  CUlibrary library = load();
  CUkernel scale = kernel(library, kScale);
  ASSERT_CU(cuCtxSetCurrent(nullptr));
  CUfunction f = nullptr;
  EXPECT_EQ(cuKernelGetFunction(&f, scale), CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  ASSERT_CU(cuLibraryUnload(library));
}

// The loading mode is the process's (CUDA_MODULE_LOADING at cuInit): a
// helper process shows both.
TEST(LibraryLoading, EagerLoadsIntoEveryContextLazyAtFirstUse) {
  init_primary(0);
  auto run = [](const char* mode) {
    std::map<std::string, std::string> env;
    if (mode) env["CUDA_MODULE_LOADING"] = mode;
    int status = -1;
    std::istringstream out(run_helper({"library", image_path("kernels.fatbin")}, env, &status));
    EXPECT_EQ(status, 0);
    std::map<std::string, std::vector<long long>> lines;
    for (std::string line; std::getline(out, line);) {
      std::istringstream words(line);
      std::string key, word;
      words >> key;
      if (key == "mode") {
        words >> word;
        lines[key].push_back(word == "eager");
      }
      for (long long v; words >> v;)
        lines[key].push_back(v);
    }
    return lines;
  };
  const long long context = 64 << 20;  // FAKECUDA_CTX_MEM of the tests
  auto lazy = run(nullptr);
  ASSERT_EQ(lazy["mode"], std::vector<long long>{0});
  EXPECT_EQ(lazy["load"], (std::vector<long long>{0, 0}));
  EXPECT_EQ(lazy["new-context"], std::vector<long long>{context});
  ASSERT_EQ(lazy["function"].size(), 1u);
  EXPECT_GE(lazy["function"][0], 2 << 20);
  auto unknown = run("SOMETIMES");
  EXPECT_EQ(unknown["mode"], std::vector<long long>{0}) << "anything but EAGER is LAZY";

  auto eager = run("EAGER");
  ASSERT_EQ(eager["mode"], std::vector<long long>{1});
  ASSERT_EQ(eager["load"].size(), 2u);
  EXPECT_GE(eager["load"][0], 2 << 20) << "loaded into the current context";
  EXPECT_EQ(eager["load"][1], eager["load"][0]) << "and into the other one";
  EXPECT_EQ(eager["new-context"], std::vector<long long>{context + eager["load"][0]})
      << "and into a context created later";
  EXPECT_EQ(eager["function"], std::vector<long long>{0});
}

TEST(Functions, LoadLazilyUntilLaunchedOrLoaded) {
  init_primary(0);
  const std::string ptx = read_image("kernels.ptx");
  CUmodule module = nullptr;
  ASSERT_CU(cuModuleLoadData(&module, ptx.data()));
  CUfunction scale = nullptr, spin = nullptr;
  ASSERT_CU(cuModuleGetFunction(&scale, module, kScale));
  ASSERT_CU(cuModuleGetFunction(&spin, module, "spin_image"));
  CUfunctionLoadingState state;
  ASSERT_CU(cuFuncIsLoaded(&state, scale));
  EXPECT_EQ(state, CU_FUNCTION_LOADING_STATE_UNLOADED);
  ASSERT_CU(cuFuncLoad(scale));
  ASSERT_CU(cuFuncIsLoaded(&state, scale));
  EXPECT_EQ(state, CU_FUNCTION_LOADING_STATE_LOADED);
  unsigned long long ns = 1000;
  void* params[] = {&ns};
  ASSERT_CU(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  ASSERT_CU(cuFuncIsLoaded(&state, spin));
  EXPECT_EQ(state, CU_FUNCTION_LOADING_STATE_LOADED);
  EXPECT_EQ(cuFuncIsLoaded(nullptr, spin), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuModuleUnload(module));
  EXPECT_EQ(cuFuncLoad(spin), CUDA_ERROR_INVALID_HANDLE);
}

TEST(Link, RoundTripKeepsKernelsParametersAndVariables) {
  init_primary(0);
  CUlinkState link = nullptr;
  ASSERT_CU(cuLinkCreate_v2(0, nullptr, nullptr, &link));
  std::string cubin = read_image("kernels.cubin");
  std::string ptx = read_image("linked.ptx");
  ASSERT_CU(cuLinkAddData_v2(link, CU_JIT_INPUT_CUBIN, cubin.data(), cubin.size(), "kernels", 0,
                             nullptr, nullptr));
  ASSERT_CU(cuLinkAddData_v2(link, CU_JIT_INPUT_PTX, ptx.data(), ptx.size() + 1, "linked", 0,
                             nullptr, nullptr));
  ASSERT_CU(cuLinkAddFile_v2(link, CU_JIT_INPUT_FATBINARY, image_path("no_kernels.fatbin").c_str(),
                             0, nullptr, nullptr));
  EXPECT_EQ(cuLinkAddData_v2(link, CU_JIT_INPUT_CUBIN, cubin.data(), cubin.size(), "again", 0,
                             nullptr, nullptr),
            CUDA_ERROR_INVALID_IMAGE)
      << "a kernel defined twice";
  void* image = nullptr;
  size_t size = 0;
  ASSERT_CU(cuLinkComplete(link, &image, &size));
  ASSERT_GT(size, 0u);
  CUmodule module = nullptr;
  ASSERT_CU(cuModuleLoadData(&module, image));
  ASSERT_CU(cuLinkDestroy(link));  // the module does not need the linker's buffer

  unsigned count = 0;
  ASSERT_CU(cuModuleGetFunctionCount(&count, module));
  EXPECT_EQ(count, 5u);
  CUfunction scale = nullptr, gather = nullptr;
  ASSERT_CU(cuModuleGetFunction(&scale, module, kScale));
  ASSERT_CU(cuModuleGetFunction(&gather, module, "gather"));
  const size_t scale_offsets[] = {0, 8, 12, 16, 40}, scale_sizes[] = {8, 4, 4, 24, 1};
  for (size_t i = 0; i < 5; ++i) {
    size_t offset = 0, bytes = 0;
    ASSERT_CU(cuFuncGetParamInfo(scale, i, &offset, &bytes));
    EXPECT_EQ(offset, scale_offsets[i]) << i;
    EXPECT_EQ(bytes, scale_sizes[i]) << i;
  }
  size_t offset = 0, bytes = 0;
  ASSERT_CU(cuFuncGetParamInfo(gather, 2, &offset, &bytes));
  EXPECT_EQ(offset, 16u);
  EXPECT_EQ(bytes, 4u);
  CUdeviceptr p = 0;
  int table[28];
  ASSERT_CU(cuModuleGetGlobal_v2(&p, &bytes, module, "table"));
  EXPECT_EQ(bytes, 112u);
  ASSERT_CU(cuMemcpyDtoH_v2(table, p, sizeof(table)));
  EXPECT_EQ(table[9], 10);
  unsigned long long offsets[2];
  ASSERT_CU(cuModuleGetGlobal_v2(&p, &bytes, module, "offsets"));
  ASSERT_CU(cuMemcpyDtoH_v2(offsets, p, sizeof(offsets)));
  EXPECT_EQ(offsets[0], 0x1122334455667788ull);
  EXPECT_EQ(offsets[1], 42u);
  float data[3];
  ASSERT_CU(cuModuleGetGlobal_v2(&p, &bytes, module, "only_data"));
  ASSERT_CU(cuMemcpyDtoH_v2(data, p, sizeof(data)));
  EXPECT_EQ(data[1], 2.0f);
  ASSERT_CU(cuModuleUnload(module));
}

// Found by fuzz/image_fuzzer: the linked PTX aligned parameters to 16 bytes
// at most, so one of `.align 32` moved, and a launch through the linked
// module read its arguments from the wrong place.
TEST(Link, KeepsTheOffsetOfAParameterAlignedAbove16) {
  init_primary(0);
  const std::string ptx =
      ".version 8.0\n.target sm_90\n.address_size 64\n"
      ".visible .entry wide(.param .u64 wide_param_0, .param .align 32 .b8 wide_param_1[32],\n"
      "  .param .u8 wide_param_2, .param .align 64 .b8 wide_param_3[8])\n{\n  ret;\n}\n";
  CUlinkState link = nullptr;
  ASSERT_CU(cuLinkCreate_v2(0, nullptr, nullptr, &link));
  ASSERT_CU(cuLinkAddData_v2(link, CU_JIT_INPUT_PTX, const_cast<char*>(ptx.c_str()), ptx.size() + 1,
                             "wide", 0, nullptr, nullptr));
  void* image = nullptr;
  size_t size = 0;
  ASSERT_CU(cuLinkComplete(link, &image, &size));
  CUmodule module = nullptr;
  ASSERT_CU(cuModuleLoadData(&module, image));
  ASSERT_CU(cuLinkDestroy(link));

  CUfunction wide = nullptr;
  ASSERT_CU(cuModuleGetFunction(&wide, module, "wide"));
  const size_t offsets[] = {0, 32, 64, 128}, sizes[] = {8, 32, 1, 8};
  for (size_t i = 0; i < 4; ++i) {
    size_t offset = 0, bytes = 0;
    ASSERT_CU(cuFuncGetParamInfo(wide, i, &offset, &bytes));
    EXPECT_EQ(offset, offsets[i]) << i;
    EXPECT_EQ(bytes, sizes[i]) << i;
  }
  ASSERT_CU(cuModuleUnload(module));
}

TEST(Link, ArgumentChecks) {
  init_primary(0);
  EXPECT_EQ(cuLinkCreate_v2(0, nullptr, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUlinkState link = nullptr;
  EXPECT_EQ(cuLinkCreate_v2(1, nullptr, nullptr, &link), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuLinkCreate_v2(0, nullptr, nullptr, &link));
  void* image = nullptr;
  size_t size = 0;
  EXPECT_EQ(cuLinkComplete(link, &image, &size), CUDA_ERROR_INVALID_VALUE) << "nothing added";
  std::string cubin = read_image("kernels.cubin");
  EXPECT_EQ(cuLinkAddData_v2(link, CU_JIT_INPUT_PTX, cubin.data(), cubin.size(), "x", 0, nullptr,
                             nullptr),
            CUDA_ERROR_INVALID_IMAGE)
      << "not what the type says";
  EXPECT_EQ(cuLinkAddData_v2(link, CU_JIT_INPUT_CUBIN, nullptr, 10, "x", 0, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLinkAddData_v2(link, CU_JIT_INPUT_CUBIN, cubin.data(), 0, "x", 0, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLinkAddData_v2(link, CU_JIT_NUM_INPUT_TYPES, cubin.data(), cubin.size(), "x", 0,
                             nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLinkAddData_v2(link, CU_JIT_INPUT_OBJECT, cubin.data(), cubin.size(), "x", 0, nullptr,
                             nullptr),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(
      cuLinkAddFile_v2(link, CU_JIT_INPUT_CUBIN, image_path("absent").c_str(), 0, nullptr, nullptr),
      CUDA_ERROR_FILE_NOT_FOUND);
  ASSERT_CU(cuLinkAddData_v2(link, CU_JIT_INPUT_CUBIN, cubin.data(), cubin.size(), "x", 0, nullptr,
                             nullptr));
  EXPECT_EQ(cuLinkComplete(link, nullptr, &size), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuLinkDestroy(link));
  EXPECT_EQ(cuLinkDestroy(link), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_CU(cuCtxSetCurrent(nullptr));
  EXPECT_EQ(cuLinkCreate_v2(0, nullptr, nullptr, &link), CUDA_ERROR_INVALID_CONTEXT);
}

// Kernels other than spin* take FAKECUDA_KERNEL_NS (10 us) plus
// FAKECUDA_KERNEL_NS_PER_WAVE (100 ns) per wave of blocks, a wave being one
// block per SM (132 here). Event times are exact on the device clock.
TEST(KernelDuration, GrowsWithTheGrid) {
  init_primary(0);
  CUfunction touch = plain_kernel();
  CUstream stream = nullptr;
  ASSERT_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr buffer = 0;
  ASSERT_CU(cuMemAlloc_v2(&buffer, 4096));
  void* params[] = {&buffer};
  auto elapsed = [&](unsigned blocks) {
    CUevent start = nullptr, end = nullptr;
    EXPECT_CU(cuEventCreate(&start, 0));
    EXPECT_CU(cuEventCreate(&end, 0));
    EXPECT_CU(cuEventRecord(start, stream));
    EXPECT_CU(cuLaunchKernel(touch, blocks, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
    EXPECT_CU(cuEventRecord(end, stream));
    EXPECT_CU(cuEventSynchronize(end));
    float ms = 0;
    EXPECT_CU(cuEventElapsedTime(&ms, start, end));
    cuEventDestroy_v2(start);
    cuEventDestroy_v2(end);
    return ms;
  };
  EXPECT_GE(elapsed(1), 0.0101f);                // 10 us + one wave
  EXPECT_GE(elapsed(132 * 10'000), 1.01f);       // 10 us + 10000 waves of 100 ns
  EXPECT_LT(elapsed(1), elapsed(132 * 10'000));  // a large grid holds the device longer
  ASSERT_CU(cuMemFree_v2(buffer));
  ASSERT_CU(cuStreamDestroy_v2(stream));
}

TEST(KernelDuration, KernelsLeaveMemoryAsItWas) {
  init_primary(0);
  const std::string fatbin = read_image("kernels.fatbin");
  CUmodule module = nullptr;
  ASSERT_CU(cuModuleLoadData(&module, fatbin.data()));
  CUfunction fill = nullptr;
  ASSERT_CU(cuModuleGetFunction(&fill, module, "_Z4fillIiEvPT_S0_"));
  CUdeviceptr out = 0;
  ASSERT_CU(cuMemAlloc_v2(&out, 64));
  ASSERT_CU(cuMemsetD8_v2(out, 0xab, 64));
  int value = 5;
  void* params[] = {&out, &value};
  ASSERT_CU(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  unsigned char bytes[64];
  ASSERT_CU(cuMemcpyDtoH_v2(bytes, out, sizeof(bytes)));
  for (unsigned char b : bytes)
    EXPECT_EQ(b, 0xab) << "kernels do not compute";
  ASSERT_CU(cuMemFree_v2(out));
  ASSERT_CU(cuModuleUnload(module));
}

}  // namespace
}  // namespace fakecuda::test
