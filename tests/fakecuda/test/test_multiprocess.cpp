// Several processes share one simulated GPU: its memory, and its timeline.
#include <signal.h>

#include <fstream>
#include <set>

#include "gpulimit/trace/trace.h"
#include "support.h"

namespace fakecuda::test {
namespace {

constexpr size_t kMiB = 1ull << 20;
constexpr size_t kGiB = 1ull << 30;

TEST(MultiProcess, AllocationsOfOneProcessShrinkWhatAnotherGets) {
  init_primary(0);
  const size_t before = free_memory();
  Helper holder = spawn_helper({"alloc", std::to_string(3 * kGiB)});
  ASSERT_EQ(holder.read_line(), "CUDA_SUCCESS");
  EXPECT_EQ(before - free_memory(), 3 * kGiB + 64 * kMiB) << "its memory and its context";
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc_v2(&p, 2 * kGiB), CUDA_ERROR_OUT_OF_MEMORY);

  // Killed: its memory comes back, as on a real GPU.
  kill(holder.pid, SIGKILL);
  EXPECT_EQ(holder.wait(), 128 + SIGKILL);
  ASSERT_CU(cuMemAlloc_v2(&p, 2 * kGiB));
  EXPECT_EQ(before - free_memory(), 2 * kGiB);
  ASSERT_CU(cuMemFree_v2(p));
  EXPECT_EQ(free_memory(), before);
}

TEST(MultiProcess, RacingProcessesNeverOverbookTheDevice) {
  // Five processes ask for 1 GiB each of a 4 GiB device (each context takes
  // 64 MiB): exactly three fit.
  std::vector<Helper> helpers;
  for (int i = 0; i < 5; ++i)
    helpers.push_back(spawn_helper({"alloc", std::to_string(kGiB)}));
  int granted = 0, refused = 0;
  for (Helper& h : helpers) {
    const std::string result = h.read_line();
    granted += result == "CUDA_SUCCESS";
    refused += result == "CUDA_ERROR_OUT_OF_MEMORY";
  }
  for (Helper& h : helpers) {
    kill(h.pid, SIGKILL);
    h.wait();
  }
  EXPECT_EQ(granted, 3);
  EXPECT_EQ(refused, 2);
}

TEST(MultiProcess, KernelsOfTwoProcessesShareOneTimeline) {
  const std::string trace_path = test_dir() + "/trace";
  const std::map<std::string, std::string> env = {{"FAKECUDA_TRACE", trace_path}};
  // 20 kernels of 5 ms each, from two processes at once.
  Helper a = spawn_helper({"spin", "5000000", "20"}, env);
  Helper b = spawn_helper({"spin", "5000000", "20"}, env);
  ASSERT_EQ(a.read_line(), "started");
  ASSERT_EQ(b.read_line(), "started");
  EXPECT_EQ(a.read_line(), "done");
  EXPECT_EQ(b.read_line(), "done");
  ASSERT_EQ(a.wait(), 0);
  ASSERT_EQ(b.wait(), 0);

  auto trace = gpulimit::trace::load(trace_path);
  ASSERT_TRUE(trace) << trace.error().message();
  const auto report = gpulimit::trace::analyze(*trace, {.device = 0});
  EXPECT_EQ(report.kernels, 40u);
  ASSERT_EQ(report.pids.size(), 2u);
  for (const auto& usage : report.pids) {
    EXPECT_EQ(usage.kernels, 20u);
    EXPECT_EQ(usage.busy_ns, 100'000'000);
  }
  EXPECT_EQ(report.overlaps.count, 0u) << report;
  EXPECT_EQ(report.same_stream_overlaps.count, 0u) << report;
  EXPECT_GE(report.window.length_ns(), 200'000'000);
}

TEST(MultiProcess, AnotherMachineConfigurationIsRefusedWhileTheFileIsInUse) {
  init_primary(0);
  int status = 0;
  const std::string out = run_helper({"init"}, {{"FAKECUDA_MEM", "8G"}}, &status);
  EXPECT_EQ(out, "CUDA_ERROR_OPERATING_SYSTEM\n");
}

TEST(MultiProcess, ADamagedStateFileNobodyUsesIsRebuilt) {
  const std::string path = test_dir() + "/damaged";
  {
    std::ofstream junk(path, std::ios::binary);
    const std::string bytes(1 << 20, '\xff');
    junk << bytes;
  }
  const std::string out = run_helper({"devices"}, {{"FAKECUDA_STATE", path}});
  EXPECT_EQ(out.substr(0, 2), "2\n") << out;
}

}  // namespace
}  // namespace fakecuda::test
