// A tenant that writes junk into its own ledger file: the one file of the
// server's world it can write (the board is read-only to it). With the real
// gpulimitd and two tenants attached, the hostile one damages its ledger in
// one way or another and then one of its processes dies, so that the server
// reaps that file and reads it for `status`. The server must stay up and go
// on serving the other tenant (grants, status, reaping), and a process of
// the hostile tenant that opens the damaged ledger afterwards must get a
// clean refusal or a rebuilt ledger, never a crash. Bounds are generous: only
// a wedged or dead server reaches them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "forked_process.h"
#include "gpulimit/shm/tenant_ledger.h"
#include "gpulimit/testing/temporary_directory.h"
#include "server_process.h"
#include "test_client.h"

namespace server_test {
namespace {

namespace shm = gpulimit::shm;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kCap = 4 * kGiB;
// Far beyond what a working server needs, on any machine.
constexpr milliseconds kPatience{10'000};

// The ledger as it lies in its file, layout version 2 (shm/source/
// ledger_layout.h), so that the test can write absurd values into chosen
// fields. The tests check that a real ledger file is exactly this size.
struct FileHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t layout_size;
};
struct alignas(64) FileDevice {
  unsigned char uuid[16];
  uint64_t cap;
  uint64_t used;
  uint64_t oom_denials;
};
struct alignas(64) FileSlot {
  int32_t pid;
  uint32_t inflight;
  uint64_t held[shm::kMaxDevices];
};
struct FileLedger {
  FileHeader header;
  uint32_t max_devices;
  uint32_t max_processes;
  uint32_t device_count;
  uint32_t slot_high_water;
  uint32_t recount_seq;
  alignas(64) pthread_mutex_t reaper_mutex;
  FileDevice devices[shm::kMaxDevices];
  FileSlot slots[shm::kMaxProcesses];
};

enum class Junk {
  kRandomBytes,             // the whole file, header included
  kAbsurdCounts,            // a valid header, then counts far out of range
  kJunkBehindValidCounts,   // counts in range, devices and slots junk, a recount "in progress"
  kTruncated,               // a few bytes left
  kSymlinkToAnotherLedger,  // the name now points at the other tenant's ledger
  kFifo,                    // the name is now a FIFO nobody writes to
  kJunkMutex,               // the robust reaper mutex overwritten with random bytes
  kMutexHeldByNoThread,     // its lock word names a thread that does not exist
};

std::string junk_name(const ::testing::TestParamInfo<Junk>& info) {
  switch (info.param) {
    case Junk::kRandomBytes:
      return "RandomBytes";
    case Junk::kAbsurdCounts:
      return "AbsurdCounts";
    case Junk::kJunkBehindValidCounts:
      return "JunkBehindValidCounts";
    case Junk::kTruncated:
      return "Truncated";
    case Junk::kSymlinkToAnotherLedger:
      return "SymlinkToAnotherLedger";
    case Junk::kFifo:
      return "Fifo";
    case Junk::kJunkMutex:
      return "JunkMutex";
    case Junk::kMutexHeldByNoThread:
      return "MutexHeldByNoThread";
  }
  return "Unknown";
}

// The name no longer leads to a regular file: nothing of the tenant's can
// be read through it, by the server or by the tenant.
bool replaces_the_file(Junk junk) {
  return junk == Junk::kSymlinkToAnotherLedger || junk == Junk::kFifo;
}

// The header and the counts still pass: the file is still taken for a
// ledger, by the server and by the tenant's processes.
bool still_a_ledger(Junk junk) {
  return junk == Junk::kJunkBehindValidCounts || junk == Junk::kJunkMutex ||
         junk == Junk::kMutexHeldByNoThread;
}

// A process of the tenant that attaches while another one is attached
// waits for the reaper mutex, and a mutex "held" by no thread is never
// given up: the tenant wedges its own new processes, as it could by holding
// the opener lock (flock) of its ledger forever. The server only ever tries
// that mutex, and gives up. (Random bytes may decode as such a mutex, too.)
bool wedges_its_own_openers(Junk junk) {
  return junk == Junk::kJunkMutex || junk == Junk::kMutexHeldByNoThread;
}

void fill_random(void* bytes, std::size_t size, std::mt19937_64& random) {
  auto* out = static_cast<unsigned char*>(bytes);
  for (std::size_t i = 0; i < size; ++i)
    out[i] = static_cast<unsigned char>(random());
}

bool read_whole(const std::string& path, FileLedger& ledger) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool read = pread(fd, &ledger, sizeof ledger, 0) == static_cast<ssize_t>(sizeof ledger);
  close(fd);
  return read;
}

// Writes in place, as a tenant process that maps the file would: the file
// stays the same file, of the same size.
bool write_whole(const std::string& path, const void* bytes, std::size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool written = pwrite(fd, bytes, size, 0) == static_cast<ssize_t>(size);
  close(fd);
  return written;
}

off_t size_of(const std::string& path) {
  struct stat status {};
  return lstat(path.c_str(), &status) == 0 ? status.st_size : -1;
}

// A process of `tenant`: attaches to its ledger and reserves `bytes` on
// kGpu0 (unless 0), says Hello, wants the device and says "granted" once it
// holds the token when `wants`, else says "ready". Never acknowledges a
// revoke. Waits to be killed.
int tenant_process(ParentLine& parent, const std::string& socket, const std::string& dir,
                   const std::string& tenant, uint64_t bytes, bool wants) {
  std::unique_ptr<shm::TenantLedger> ledger;
  if (bytes > 0) {
    std::string error;
    ledger = shm::TenantLedger::open(dir, tenant, error);
    if (!ledger) return 2;
    const int device = ledger->device(kGpu0.data(), kCap);
    if (device < 0 || !ledger->reserve(device, bytes)) return 3;
  }
  TestClient client(socket);
  HelloOptions options;
  options.tenant = tenant;
  options.ledger_dir = dir;
  if (!client.hello(options)) return 4;
  if (wants) {
    if (!client.want(client.device()) || !client.wait_until_held(client.device())) return 5;
    parent.say("granted");
  } else {
    parent.say("ready");
  }
  for (;;)
    pause();
}

// A process of the tenant opening its ledger, in a child so that a crash
// shows as an exit status: says "refused <why>" or "attached devices=N
// reserved=0|1" (after registering kGpu0 and reserving 1 MiB), and exits 0.
std::string attach_in_child(const std::string& dir, const std::string& tenant, int& status) {
  ForkedProcess opener([=](ParentLine& parent) {
    std::string error;
    auto ledger = shm::TenantLedger::open(dir, tenant, error);
    if (!ledger) {
      parent.say("refused " + error);
      return 0;
    }
    const uint32_t devices = ledger->device_count();
    const int device = ledger->device(kGpu0.data(), kCap);
    const bool reserved = device >= 0 && ledger->reserve(device, kMiB);
    parent.say("attached devices=" + std::to_string(devices) +
               " reserved=" + std::to_string(reserved ? 1 : 0));
    return 0;
  });
  const std::string line = opener.expect("", kPatience);
  status = opener.wait_for_exit(kPatience);
  return line;
}

const nlohmann::json* tenant_entry(const nlohmann::json& status, const std::string& tenant) {
  for (const auto& entry : status["tenants"])
    if (entry["tenant"] == tenant) return &entry;
  return nullptr;
}

class HostileTenant : public ::testing::Test {
 protected:
  void start_server(const std::vector<std::string>& options = {"--quantum-ms", "20"}) {
    server_ = std::make_unique<ServerProcess>(dir_.path(), options);
    ASSERT_TRUE(server_->wait_until_serving()) << server_->log();
  }

  std::string path(const std::string& tenant) const {
    return shm::TenantLedger::path_for(dir_.path(), getuid(), tenant);
  }

  std::unique_ptr<ForkedProcess> start_process(const std::string& tenant, uint64_t bytes,
                                               bool wants = false) {
    const std::string socket = server_->socket();
    const std::string dir = dir_.path();
    return std::make_unique<ForkedProcess>([=](ParentLine& parent) {
      return tenant_process(parent, socket, dir, tenant, bytes, wants);
    });
  }

  // Until the server's log has a line about the ledger at `ledger_path`: its
  // reaper logs every outcome but a retry, and gives up on a busy ledger
  // after 100 tries 10 ms apart.
  bool wait_for_reaper_line(const std::string& ledger_path) {
    const std::string wanted = "ledger " + ledger_path + ":";
    for (const auto deadline = Clock::now() + 3 * kPatience; Clock::now() < deadline;) {
      if (server_->log().find(wanted) != std::string::npos) return true;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return false;
  }

  // Checks with waitpid: a server that died is not taken for a running one.
  bool server_running() { return server_ && server_->wait_for_exit(milliseconds(0)) == -1; }

  // A Want of `client`'s tenant ends with the token on the board.
  ::testing::AssertionResult gets_the_token(TestClient& client) {
    if (!client.want(client.device())) return ::testing::AssertionFailure() << "Want not sent";
    if (!client.wait_until_held(client.device(), kPatience))
      return ::testing::AssertionFailure() << "no grant\n" << server_->log();
    return ::testing::AssertionSuccess();
  }

  gpulimit::testing::TemporaryDirectory dir_;
  std::unique_ptr<ServerProcess> server_;
};

class HostileTenantJunk : public HostileTenant, public ::testing::WithParamInterface<Junk> {
 protected:
  // What the hostile tenant does to its ledger at `target`, which processes
  // of the tenant still map.
  void damage(const std::string& target) {
    std::mt19937_64 random(0x6a756e6b);  // fixed: a failure can be replayed
    FileLedger ledger;
    ASSERT_TRUE(read_whole(target, ledger));
    switch (GetParam()) {
      case Junk::kRandomBytes:
        fill_random(&ledger, sizeof ledger, random);
        break;
      case Junk::kAbsurdCounts:
        ledger.max_devices = 0xdeadbeef;
        ledger.max_processes = 7;
        ledger.device_count = UINT32_MAX;
        ledger.slot_high_water = UINT32_MAX;
        ledger.recount_seq = 1;  // odd: "a recount is in progress"
        break;
      case Junk::kJunkBehindValidCounts:
        // The largest counts that pass, and whatever behind them. The
        // robust mutex stays as it is; its junk is a case of its own.
        ledger.device_count = shm::kMaxDevices;
        ledger.slot_high_water = shm::kMaxProcesses;
        ledger.recount_seq = 0x7fff'ffff;  // odd, as if a reaper died mid-recount
        fill_random(ledger.devices, sizeof ledger.devices, random);
        std::memcpy(ledger.devices[0].uuid, kGpu0.data(), kGpu0.size());
        ledger.devices[0].cap = UINT64_MAX;
        ledger.devices[0].used = UINT64_MAX;
        fill_random(ledger.slots, sizeof ledger.slots, random);
        for (FileSlot& slot : ledger.slots) {
          // Not in flight, so that a recount can finish; pids that are
          // nobody's or somebody else's.
          slot.inflight = 0;
          if (slot.pid == 0) slot.pid = 1;
        }
        break;
      case Junk::kJunkMutex:
        fill_random(&ledger.reaper_mutex, sizeof ledger.reaper_mutex, random);
        break;
      case Junk::kMutexHeldByNoThread: {
        // A robust mutex's first word is its owner's thread id (glibc);
        // thread ids stay below 2^22.
        const int32_t owner = 0x3fff'fff0;
        std::memcpy(&ledger.reaper_mutex, &owner, sizeof owner);
        break;
      }
      case Junk::kTruncated:
        ASSERT_EQ(truncate(target.c_str(), 5), 0);
        return;
      case Junk::kSymlinkToAnotherLedger:
        ASSERT_EQ(unlink(target.c_str()), 0);
        ASSERT_EQ(symlink(path("good").c_str(), target.c_str()), 0);
        return;
      case Junk::kFifo:
        ASSERT_EQ(unlink(target.c_str()), 0);
        ASSERT_EQ(mkfifo(target.c_str(), 0600), 0);
        return;
    }
    ASSERT_TRUE(write_whole(target, &ledger, sizeof ledger));
  }
};

TEST_P(HostileTenantJunk, TheServerKeepsServingTheOtherTenant) {
  start_server();
  // The good tenant: a process here, watching its ledger, and one to kill.
  std::string error;
  auto good_ledger = shm::TenantLedger::open(dir_.path(), "good", error);
  ASSERT_TRUE(good_ledger) << error;
  const int good_device = good_ledger->device(kGpu0.data(), kCap);
  ASSERT_GE(good_device, 0);
  ASSERT_TRUE(good_ledger->reserve(good_device, 256 * kMiB));
  TestClient good(server_->socket());
  HelloOptions good_options;
  good_options.tenant = "good";
  good_options.ledger_dir = dir_.path();
  ASSERT_TRUE(good.hello(good_options)) << good.refusal();
  auto good_process = start_process("good", kGiB);
  ASSERT_NE(good_process->expect("ready"), "") << server_->log();
  ASSERT_EQ(good_ledger->used(good_device), 256 * kMiB + kGiB);
  // The hostile tenant: one process holding the token (it never
  // acknowledges a revoke), one that dies after the damage.
  auto keeper = start_process("hostile", kGiB, /*wants=*/true);
  ASSERT_NE(keeper->expect("granted"), "") << server_->log();
  auto victim = start_process("hostile", 512 * kMiB);
  ASSERT_NE(victim->expect("ready"), "") << server_->log();
  const std::string hostile = path("hostile");
  ASSERT_EQ(size_of(hostile), static_cast<off_t>(sizeof(FileLedger)))
      << "FileLedger no longer mirrors the ledger's layout";

  damage(hostile);
  victim->kill_now();  // the server reaps the damaged file
  ASSERT_TRUE(wait_for_reaper_line(hostile)) << server_->log();

  // Still there, and status still answers, in JSON.
  ASSERT_TRUE(server_running()) << server_->log();
  const auto status = TestClient(server_->socket()).status();
  ASSERT_TRUE(status) << server_->log();
  ASSERT_FALSE(status->is_discarded());
  const nlohmann::json* good_entry = tenant_entry(*status, "good");
  ASSERT_NE(good_entry, nullptr) << status->dump();
  EXPECT_EQ((*good_entry)["devices"][0]["memory_used"], 256 * kMiB + kGiB);
  EXPECT_EQ((*good_entry)["devices"][0]["memory_cap"], kCap);
  const nlohmann::json* hostile_entry = tenant_entry(*status, "hostile");
  ASSERT_NE(hostile_entry, nullptr) << status->dump();
  const auto& hostile_memory = (*hostile_entry)["devices"][0]["memory_used"];
  EXPECT_TRUE(hostile_memory.is_null() || hostile_memory.is_number_unsigned()) << status->dump();
  EXPECT_TRUE(still_a_ledger(GetParam()) || hostile_memory.is_null())
      << "figures from a file that is no ledger\n"
      << status->dump();
  // How glibc takes a mutex of random bytes is its own business: the reaper
  // runs in a child for that. Every other file is judged, not crashed on.
  if (GetParam() != Junk::kJunkMutex) {
    EXPECT_EQ(server_->log().find("ended abnormally"), std::string::npos)
        << "a damaged file crashed the reaper\n"
        << server_->log();
  }
  EXPECT_EQ(good_ledger->used(good_device), 256 * kMiB + kGiB)
      << "the other tenant's ledger is untouched";

  // The other tenant still gets the token (from the hostile holder, which
  // never acknowledges: by the ack timeout).
  EXPECT_TRUE(gets_the_token(good));

  // And its dead process's memory still comes back.
  good_process->kill_now();
  for (const auto deadline = Clock::now() + kPatience;
       good_ledger->used(good_device) != 256 * kMiB && Clock::now() < deadline;)
    std::this_thread::sleep_for(milliseconds(2));
  EXPECT_EQ(good_ledger->used(good_device), 256 * kMiB) << server_->log();

  // A process of the hostile tenant opening the damaged ledger while the
  // keeper still uses it: refused, unless the file still passes as a ledger.
  int exit_status = -1;
  std::string opened;
  if (!wedges_its_own_openers(GetParam())) {
    opened = attach_in_child(dir_.path(), "hostile", exit_status);
    EXPECT_EQ(exit_status, 0) << opened;
    EXPECT_TRUE(opened.starts_with("refused " + hostile + ": ") ||
                (still_a_ledger(GetParam()) && opened.starts_with("attached ")))
        << opened;
  }

  // Once no process uses it, a file is rebuilt; a name that is no file any
  // more stays refused.
  keeper->kill_now();
  opened = attach_in_child(dir_.path(), "hostile", exit_status);
  EXPECT_EQ(exit_status, 0) << opened;
  const std::string expected =
      replaces_the_file(GetParam()) ? "refused " + hostile + ": " : "attached devices=0 reserved=1";
  EXPECT_TRUE(opened.starts_with(expected)) << opened;

  EXPECT_EQ(good_ledger->used(good_device), 256 * kMiB);
  ASSERT_TRUE(server_running()) << server_->log();
  const auto last_status = TestClient(server_->socket()).status();
  ASSERT_TRUE(last_status && !last_status->is_discarded()) << server_->log();
  EXPECT_NE(tenant_entry(*last_status, "good"), nullptr);
  EXPECT_EQ(server_->stop(), 0) << server_->log();
}

INSTANTIATE_TEST_SUITE_P(Junk, HostileTenantJunk,
                         ::testing::Values(Junk::kRandomBytes, Junk::kAbsurdCounts,
                                           Junk::kJunkBehindValidCounts, Junk::kTruncated,
                                           Junk::kSymlinkToAnotherLedger, Junk::kFifo,
                                           Junk::kJunkMutex, Junk::kMutexHeldByNoThread),
                         junk_name);

// A tenant that keeps its ledger flipping between a valid image and an
// empty file while its processes die one after another: some of the
// server's recounts find the file shrunk under their mapping.
TEST_F(HostileTenant, ALedgerFlippingUnderTheReaperNeverStopsTheServer) {
  start_server();
  const std::string hostile = path("hostile");
  std::vector<unsigned char> image;
  {
    std::string error;
    auto ledger = shm::TenantLedger::open(dir_.path(), "hostile", error);
    ASSERT_TRUE(ledger) << error;
    ASSERT_GE(ledger->device(kGpu0.data(), kCap), 0);
    image.resize(static_cast<std::size_t>(size_of(hostile)));
    const int fd = ::open(hostile.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pread(fd, image.data(), image.size(), 0), static_cast<ssize_t>(image.size()));
    close(fd);
  }  // detached: the image has no process and an unlocked mutex

  std::string error;
  auto good_ledger = shm::TenantLedger::open(dir_.path(), "good", error);
  ASSERT_TRUE(good_ledger) << error;
  const int good_device = good_ledger->device(kGpu0.data(), kCap);
  ASSERT_TRUE(good_ledger->reserve(good_device, 256 * kMiB));
  TestClient good(server_->socket());
  HelloOptions good_options;
  good_options.tenant = "good";
  good_options.ledger_dir = dir_.path();
  ASSERT_TRUE(good.hello(good_options)) << good.refusal();

  ForkedProcess flipper([=](ParentLine& parent) {
    const int fd = ::open(hostile.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return 2;
    parent.say("flipping");
    for (;;) {
      if (ftruncate(fd, 0) != 0) return 3;
      if (pwrite(fd, image.data(), image.size(), 0) != static_cast<ssize_t>(image.size())) return 4;
    }
  });
  ASSERT_NE(flipper.expect("flipping"), "");

  constexpr int kDeaths = 20;
  for (int i = 0; i < kDeaths; ++i) {
    auto process = start_process("hostile", 0);  // Hello only: its exit reaps the ledger
    ASSERT_NE(process->expect("ready"), "") << server_->log();
    process->kill_now();
  }
  std::this_thread::sleep_for(milliseconds(100));  // let some recounts meet the flipping
  flipper.kill_now();

  ASSERT_TRUE(server_running()) << server_->log();
  const auto status = TestClient(server_->socket()).status();
  ASSERT_TRUE(status && !status->is_discarded()) << server_->log();
  const nlohmann::json* good_entry = tenant_entry(*status, "good");
  ASSERT_NE(good_entry, nullptr) << status->dump();
  EXPECT_EQ((*good_entry)["devices"][0]["memory_used"], 256 * kMiB);
  EXPECT_TRUE(gets_the_token(good));

  auto good_process = start_process("good", kGiB);
  ASSERT_NE(good_process->expect("ready"), "") << server_->log();
  ASSERT_EQ(good_ledger->used(good_device), 256 * kMiB + kGiB);
  good_process->kill_now();
  for (const auto deadline = Clock::now() + kPatience;
       good_ledger->used(good_device) != 256 * kMiB && Clock::now() < deadline;)
    std::this_thread::sleep_for(milliseconds(2));
  EXPECT_EQ(good_ledger->used(good_device), 256 * kMiB) << server_->log();

  int exit_status = -1;
  const std::string opened = attach_in_child(dir_.path(), "hostile", exit_status);
  EXPECT_EQ(exit_status, 0) << opened;
  EXPECT_TRUE(opened.starts_with("attached ")) << "nobody uses it: rebuilt\n" << opened;
  EXPECT_EQ(server_->stop(), 0) << server_->log();
}

}  // namespace
}  // namespace server_test
