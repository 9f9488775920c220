// Interprocess memory and event handles between real processes of one
// simulated machine.
#include <signal.h>

#include <cstring>

#include "support.h"

namespace fakecuda::test {
namespace {

constexpr size_t kMiB = 1ull << 20;
constexpr size_t kContext = 64 * kMiB;  // FAKECUDA_CTX_MEM of the tests

std::string to_hex(const void* bytes, size_t n) {
  std::string out;
  char two[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(two, sizeof two, "%02x", static_cast<const unsigned char*>(bytes)[i]);
    out += two;
  }
  return out;
}

CUipcMemHandle from_hex(const std::string& hex) {
  CUipcMemHandle h{};
  for (size_t i = 0; i < sizeof h && 2 * i + 1 < hex.size(); ++i)
    h.reserved[i] = static_cast<char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  return h;
}

// Memory of this process, exported.
struct Exported {
  CUdeviceptr p = 0;
  CUipcMemHandle handle{};
  std::string hex;
};
Exported export_memory(size_t bytes, unsigned char fill) {
  Exported e;
  EXPECT_CU(cuMemAlloc_v2(&e.p, bytes));
  EXPECT_CU(cuMemsetD8_v2(e.p, fill, bytes));
  EXPECT_CU(cuIpcGetMemHandle(&e.handle, e.p));
  e.hex = to_hex(&e.handle, sizeof e.handle);
  return e;
}

unsigned first_word(CUdeviceptr p) {
  unsigned word = 0;
  EXPECT_CU(cuMemcpyDtoH_v2(&word, p, sizeof word));
  return word;
}

TEST(Ipc, AnotherProcessSeesTheBytesAndWritesGoBothWays) {
  init_primary(0);
  Exported e = export_memory(4 * kMiB, 0x11);
  Helper opener = spawn_helper({"ipc-open", e.hex});
  ASSERT_EQ(opener.read_line(), "CUDA_SUCCESS");
  EXPECT_EQ(opener.ask("read"), "11111111");
  EXPECT_EQ(opener.ask("fill 22"), "CUDA_SUCCESS");
  EXPECT_EQ(first_word(e.p), 0x22222222u);
  unsigned char last = 0;
  ASSERT_CU(cuMemcpyDtoH_v2(&last, e.p + 4 * kMiB - 1, 1));
  EXPECT_EQ(last, 0x22);
  ASSERT_CU(cuMemsetD8_v2(e.p, 0x33, 4 * kMiB));
  EXPECT_EQ(opener.ask("read"), "33333333");
  EXPECT_EQ(opener.ask("close"), "CUDA_SUCCESS");
  EXPECT_EQ(opener.wait(), 0);
  ASSERT_CU(cuMemFree_v2(e.p));
}

TEST(Ipc, BytesWrittenBeforeTheExportAreKept) {
  init_primary(0);
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc_v2(&p, 8 * kMiB));
  // Only the second MiB was ever written; the rest still reads as zero.
  ASSERT_CU(cuMemsetD32_v2(p + kMiB, 0xfeedf00d, kMiB / 4));
  CUipcMemHandle handle{};
  ASSERT_CU(cuIpcGetMemHandle(&handle, p));
  EXPECT_EQ(first_word(p), 0u);
  EXPECT_EQ(first_word(p + kMiB), 0xfeedf00du);
  EXPECT_EQ(first_word(p + 2 * kMiB - 4), 0xfeedf00du);
  EXPECT_EQ(first_word(p + 2 * kMiB), 0u);
  CUipcMemHandle again{};
  ASSERT_CU(cuIpcGetMemHandle(&again, p));
  EXPECT_EQ(std::memcmp(&handle, &again, sizeof handle), 0) << "one export per allocation";
  ASSERT_CU(cuMemFree_v2(p));
}

TEST(Ipc, OpeningInTheExportingProcessIsRefused) {
  init_primary(0);
  Exported e = export_memory(kMiB, 0);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuIpcOpenMemHandle_v2(&p, e.handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuIpcOpenMemHandle(&p, e.handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_CU(cuMemFree_v2(e.p));
}

TEST(Ipc, OnlyLinearDeviceMemoryIsExported) {
  init_primary(0);
  CUipcMemHandle handle{};
  CUdeviceptr managed = 0;
  ASSERT_CU(cuMemAllocManaged(&managed, kMiB, CU_MEM_ATTACH_GLOBAL));
  EXPECT_EQ(cuIpcGetMemHandle(&handle, managed), CUDA_ERROR_INVALID_VALUE);
  void* host = nullptr;
  ASSERT_CU(cuMemAllocHost_v2(&host, kMiB));
  EXPECT_EQ(cuIpcGetMemHandle(&handle, reinterpret_cast<CUdeviceptr>(host)),
            CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr pooled = 0;
  ASSERT_CU(cuMemAllocAsync(&pooled, kMiB, nullptr));
  EXPECT_EQ(cuIpcGetMemHandle(&handle, pooled), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuIpcGetMemHandle(&handle, 0x1000), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuIpcGetMemHandle(nullptr, managed), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFreeAsync(pooled, nullptr));
  ASSERT_CU(cuMemFreeHost(host));
  ASSERT_CU(cuMemFree_v2(managed));
}

TEST(Ipc, BadHandlesAndFlagsAreRefused) {
  init_primary(0);
  CUipcMemHandle junk{};
  std::memset(junk.reserved, 0x7f, sizeof junk.reserved);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuIpcOpenMemHandle_v2(&p, junk, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_VALUE);
  Exported e = export_memory(kMiB, 0);
  EXPECT_EQ(cuIpcOpenMemHandle_v2(&p, e.handle, 0x2), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuIpcOpenMemHandle_v2(nullptr, e.handle, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuIpcCloseMemHandle(e.p), CUDA_ERROR_INVALID_VALUE) << "not an opened mapping";
  ASSERT_CU(cuMemFree_v2(e.p));
}

TEST(Ipc, AContextOpeningTwiceGetsOnePointerAndClosesTwice) {
  init_primary(0);
  Exported e = export_memory(kMiB, 0x44);
  Helper opener = spawn_helper({"ipc-open", e.hex});
  ASSERT_EQ(opener.read_line(), "CUDA_SUCCESS");
  EXPECT_EQ(opener.ask("open"), "same");
  EXPECT_EQ(opener.ask("close"), "CUDA_SUCCESS");
  EXPECT_EQ(opener.ask("read"), "44444444") << "still mapped: one reference left";
  EXPECT_EQ(opener.ask("close"), "CUDA_SUCCESS");
  EXPECT_EQ(opener.ask("close"), "CUDA_ERROR_INVALID_VALUE");
  EXPECT_EQ(opener.wait(), 0);
  ASSERT_CU(cuMemFree_v2(e.p));
}

TEST(Ipc, TheMemoryIsChargedOnceToTheExporter) {
  init_primary(0);
  const size_t before = free_memory();
  Exported e = export_memory(32 * kMiB, 0);
  Helper opener = spawn_helper({"ipc-open", e.hex});
  ASSERT_EQ(opener.read_line(), "CUDA_SUCCESS");
  EXPECT_EQ(before - free_memory(), 32 * kMiB + kContext) << "the memory and its context";
  EXPECT_EQ(opener.ask("close"), "CUDA_SUCCESS");
  EXPECT_EQ(opener.wait(), 0);
  ASSERT_CU(cuMemFree_v2(e.p));
  EXPECT_EQ(free_memory(), before);
}

// cuMemRelease: "The memory allocation will be freed when all outstanding
// mappings to the memory are unmapped and when all outstanding references to
// the handle (including its shareable counterparts) are also released."
// Another process's import is such a reference: the device still holds the
// memory after the exporter's release, until the importer lets it go.
TEST(Ipc, AnImportedVmmAllocationOutlivesTheExportersRelease) {
  init_primary(0);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_CU(cuMemCreate(&handle, 32 * kMiB, &prop, 0));
  int fd = -1;
  ASSERT_CU(cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CUdeviceptr va = 0;
  ASSERT_CU(cuMemAddressReserve(&va, 32 * kMiB, 0, 0, 0));
  ASSERT_CU(cuMemMap(va, 32 * kMiB, 0, handle, 0));
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_CU(cuMemSetAccess(va, 32 * kMiB, &access, 1));
  ASSERT_CU(cuMemsetD8_v2(va, 0x66, 32 * kMiB));

  Helper importer = spawn_helper(
      {"vmm-import", std::to_string(getpid()), std::to_string(fd), std::to_string(32 * kMiB)});
  ASSERT_EQ(importer.read_line(), "CUDA_SUCCESS");
  const size_t held = free_memory();  // the allocation and the importer's context taken

  ASSERT_CU(cuMemUnmap(va, 32 * kMiB));
  ASSERT_CU(cuMemRelease(handle));
  close(fd);
  EXPECT_EQ(free_memory(), held) << "the import still holds the memory";
  EXPECT_EQ(importer.ask("read"), "66666666");

  EXPECT_EQ(importer.ask("release"), "CUDA_SUCCESS");
  EXPECT_EQ(free_memory(), held + 32 * kMiB) << "the last reference gone, the memory goes";
  importer.ask("exit");
  EXPECT_EQ(importer.wait(), 0);
  ASSERT_CU(cuMemAddressFree(va, 32 * kMiB));
}

TEST(Ipc, FreedByTheExporterTheMemoryLivesUntilTheLastMappingCloses) {
  init_primary(0);
  const size_t before = free_memory();
  Exported e = export_memory(32 * kMiB, 0x66);
  Helper opener = spawn_helper({"ipc-open", e.hex});
  ASSERT_EQ(opener.read_line(), "CUDA_SUCCESS");
  ASSERT_CU(cuMemFree_v2(e.p));
  EXPECT_EQ(before - free_memory(), 32 * kMiB + kContext) << "still charged to the device";
  EXPECT_EQ(opener.ask("read"), "66666666");
  EXPECT_EQ(opener.ask("fill 67"), "CUDA_SUCCESS");
  EXPECT_EQ(opener.ask("read"), "67676767");
  EXPECT_EQ(opener.ask("close"), "CUDA_SUCCESS");
  EXPECT_EQ(before - free_memory(), kContext) << "the last mapping gave it back";
  EXPECT_EQ(opener.wait(), 0);
  EXPECT_EQ(free_memory(), before);
}

TEST(Ipc, AHandleOfFreedMemoryIsRefused) {
  init_primary(0);
  Exported e = export_memory(kMiB, 0);
  ASSERT_CU(cuMemFree_v2(e.p));
  // Another allocation may take the same address and descriptor.
  CUdeviceptr reused = 0;
  ASSERT_CU(cuMemAlloc_v2(&reused, kMiB));
  CUipcMemHandle fresh{};
  ASSERT_CU(cuIpcGetMemHandle(&fresh, reused));
  Helper opener = spawn_helper({"ipc-open", e.hex});
  EXPECT_EQ(opener.read_line(), "CUDA_ERROR_INVALID_HANDLE");
  kill(opener.pid, SIGKILL);
  opener.wait();
  ASSERT_CU(cuMemFree_v2(reused));
}

TEST(Ipc, AKilledOpenersMappingIsReclaimed) {
  init_primary(0);
  const size_t before = free_memory();
  Exported e = export_memory(32 * kMiB, 0);
  Helper opener = spawn_helper({"ipc-open", e.hex});
  ASSERT_EQ(opener.read_line(), "CUDA_SUCCESS");
  ASSERT_CU(cuMemFree_v2(e.p));
  EXPECT_EQ(before - free_memory(), 32 * kMiB + kContext);
  kill(opener.pid, SIGKILL);
  EXPECT_EQ(opener.wait(), 128 + SIGKILL);
  EXPECT_EQ(free_memory(), before) << "its mapping and its context came back";
}

// The exporter goes first, by exiting or killed: the opener keeps the bytes,
// the device keeps the charge until the opener closes, and the handle can no
// longer be opened.
void exporter_goes_first(bool killed) {
  init_primary(0);
  const size_t before = free_memory();
  Helper exporter = spawn_helper({"ipc-export", std::to_string(64 * kMiB)});
  const std::string line = exporter.read_line();
  ASSERT_EQ(line.substr(0, 13), "CUDA_SUCCESS ") << line;
  const CUipcMemHandle handle = from_hex(line.substr(13));
  CUdeviceptr p = 0;
  ASSERT_CU(cuIpcOpenMemHandle_v2(&p, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  EXPECT_EQ(first_word(p), 0x5a5a5a5au);
  ASSERT_CU(cuMemsetD8_v2(p, 0x77, 64 * kMiB));
  EXPECT_EQ(exporter.ask("read"), "77777777");
  if (killed) {
    kill(exporter.pid, SIGKILL);
    EXPECT_EQ(exporter.wait(), 128 + SIGKILL);
  } else {
    exporter.ask("exit");
    EXPECT_EQ(exporter.wait(), 0);
  }
  EXPECT_EQ(first_word(p), 0x77777777u);
  EXPECT_EQ(before - free_memory(), 64 * kMiB) << "its context went, the memory stays";
  // A third process can no longer open it.
  Helper late = spawn_helper({"ipc-open", line.substr(13)});
  EXPECT_EQ(late.read_line(), "CUDA_ERROR_INVALID_HANDLE");
  kill(late.pid, SIGKILL);
  late.wait();
  ASSERT_CU(cuIpcCloseMemHandle(p));
  EXPECT_EQ(free_memory(), before);
  EXPECT_EQ(cuIpcCloseMemHandle(p), CUDA_ERROR_INVALID_VALUE);
}

TEST(Ipc, TheExporterExitingFirstLeavesTheMemoryToTheOpener) {
  exporter_goes_first(false);
}

TEST(Ipc, TheExporterKilledFirstLeavesTheMemoryToTheOpener) {
  exporter_goes_first(true);
}

TEST(Ipc, AProcessKilledWhileOpeningAndClosingLeavesNothingBehind) {
  init_primary(0);
  const size_t before = free_memory();
  Exported e = export_memory(32 * kMiB, 0);
  // Killed at whatever instruction it is at, five times over.
  for (int round = 0; round < 5; ++round) {
    Helper churn = spawn_helper({"ipc-churn", e.hex});
    ASSERT_EQ(churn.read_line(), "running");
    usleep(static_cast<useconds_t>(2000 + 3000 * round));
    kill(churn.pid, SIGKILL);
    EXPECT_EQ(churn.wait(), 128 + SIGKILL);
  }
  ASSERT_CU(cuMemFree_v2(e.p));
  EXPECT_EQ(free_memory(), before);
  // The state is whole: another export and open still work.
  Exported again = export_memory(kMiB, 0x12);
  Helper opener = spawn_helper({"ipc-open", again.hex});
  EXPECT_EQ(opener.read_line(), "CUDA_SUCCESS");
  EXPECT_EQ(opener.ask("read"), "12121212");
  kill(opener.pid, SIGKILL);
  opener.wait();
  ASSERT_CU(cuMemFree_v2(again.p));
  EXPECT_EQ(free_memory(), before);
}

TEST(Ipc, AProcessKilledWhileExportingAndFreeingLeavesNothingBehind) {
  init_primary(0);
  const size_t before = free_memory();
  for (int round = 0; round < 5; ++round) {
    Helper churn = spawn_helper({"ipc-export-churn"});
    ASSERT_EQ(churn.read_line(), "running");
    usleep(static_cast<useconds_t>(2000 + 3000 * round));
    kill(churn.pid, SIGKILL);
    EXPECT_EQ(churn.wait(), 128 + SIGKILL);
    EXPECT_EQ(free_memory(), before) << "round " << round;
  }
  Exported e = export_memory(kMiB, 0x21);
  Helper opener = spawn_helper({"ipc-open", e.hex});
  EXPECT_EQ(opener.read_line(), "CUDA_SUCCESS");
  EXPECT_EQ(opener.ask("read"), "21212121");
  kill(opener.pid, SIGKILL);
  opener.wait();
  ASSERT_CU(cuMemFree_v2(e.p));
  EXPECT_EQ(free_memory(), before);
}

TEST(Ipc, EventsNeedInterprocessAndDisableTiming) {
  init_primary(0);
  CUipcEventHandle handle{};
  CUevent timed = nullptr, untimed = nullptr;
  ASSERT_CU(cuEventCreate(&timed, CU_EVENT_INTERPROCESS));
  ASSERT_CU(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
  EXPECT_EQ(cuIpcGetEventHandle(&handle, timed), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuIpcGetEventHandle(&handle, untimed), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuIpcGetEventHandle(nullptr, untimed), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuEventDestroy_v2(timed));
  ASSERT_CU(cuEventDestroy_v2(untimed));
}

TEST(Ipc, AnEventRecordedInOneProcessIsWaitedForInAnother) {
  init_primary(0);
  CUevent event = nullptr;
  ASSERT_CU(cuEventCreate(&event, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  CUipcEventHandle handle{};
  ASSERT_CU(cuIpcGetEventHandle(&handle, event));
  CUevent self = nullptr;
  EXPECT_EQ(cuIpcOpenEventHandle(&self, handle), CUDA_ERROR_INVALID_CONTEXT);

  // The record waits behind a flag in page-locked memory.
  unsigned* flag = nullptr;
  ASSERT_CU(cuMemAllocHost_v2(reinterpret_cast<void**>(&flag), sizeof *flag));
  *flag = 0;
  CUstream stream = nullptr;
  ASSERT_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamWaitValue32_v2(stream, reinterpret_cast<CUdeviceptr>(flag), 1,
                                   CU_STREAM_WAIT_VALUE_EQ));
  ASSERT_CU(cuEventRecord(event, stream));

  Helper other = spawn_helper({"ipc-event", to_hex(&handle, sizeof handle)});
  ASSERT_EQ(other.read_line(), "CUDA_SUCCESS");
  EXPECT_EQ(other.ask("query"), "CUDA_ERROR_NOT_READY");
  __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
  EXPECT_EQ(other.ask("sync"), "CUDA_SUCCESS");
  EXPECT_EQ(other.ask("query"), "CUDA_SUCCESS");
  ASSERT_CU(cuEventSynchronize(event));

  // Recorded there, seen here.
  ASSERT_CU(cuEventRecord(event, stream));
  ASSERT_CU(cuStreamSynchronize(stream));
  EXPECT_EQ(other.ask("record"), "CUDA_SUCCESS");
  EXPECT_CU(cuEventQuery(event));
  EXPECT_EQ(other.wait(), 0);
  ASSERT_CU(cuStreamDestroy_v2(stream));
  ASSERT_CU(cuEventDestroy_v2(event));
  ASSERT_CU(cuMemFreeHost(flag));
}

}  // namespace
}  // namespace fakecuda::test
