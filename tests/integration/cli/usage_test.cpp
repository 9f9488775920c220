// gpulimit usage end to end: a real gpulimitd with --usage-db, tenants run by
// gpulimit on the simulated GPU, and what `gpulimit usage` then reports; the
// database after the server is SIGKILLed (whole, nothing committed lost, the
// open records closed as lost by the next server); a file that is no usage
// database stops the server and is left as it was.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/testing/server_listening.h"
#include "gpulimit/usage/usage_database.h"
#include "job_under_server.h"
#include "simulated_machine.h"
#include "workload_process.h"

namespace integration {
namespace {

using namespace std::chrono_literals;
namespace usage = gpulimit::usage;

const std::string kServer = GPULIMITD_PATH;
const std::string kCli = GPULIMIT_CLI_PATH;
constexpr double kMiB = 1024.0 * 1024;

// PRAGMA integrity_check, by SQLite itself.
std::string integrity(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return "cannot open";
  }
  std::string result;
  sqlite3_exec(
      db, "PRAGMA integrity_check",
      [](void* out, int, char** values, char**) {
        *static_cast<std::string*>(out) += values[0] ? values[0] : "";
        return 0;
      },
      &result, nullptr);
  sqlite3_close(db);
  return result;
}

class Usage : public testing::Test {
 protected:
  std::string database() const { return dir_.path() + "/usage.db"; }
  std::string socket_path() const { return dir_.path() + "/gpulimitd.sock"; }

  std::unique_ptr<WorkloadProcess> start_server() {
    auto server = std::make_unique<WorkloadProcess>(
        kServer,
        std::vector<std::string>{"--foreground", "--socket", socket_path(), "--idle-exit-s", "600",
                                 "--usage-db", database(), "--usage-interval-ms", "100"},
        machine_.environment());
    EXPECT_TRUE(server->started());
    std::string error;
    EXPECT_TRUE(gpulimit::testing::wait_until_listening(socket_path(), 20s, error))
        << "gpulimitd never listened: " << error;
    return server;
  }

  // Stops `server` as systemd would, and waits for it.
  static WorkloadRun stop(WorkloadProcess& server) {
    ::kill(server.pid(), SIGTERM);
    return server.wait(30s);
  }

  Environment tenant_environment(const std::string& id) const {
    return job_under_server(machine_, socket_path(), ledgers_.path(), id);
  }

  WorkloadRun usage_report(const std::vector<std::string>& args) const {
    std::vector<std::string> all = {"usage", "--db", database()};
    all.insert(all.end(), args.begin(), args.end());
    return run_workload(kCli, all, {{"ASAN_OPTIONS", "verify_asan_link_order=0"}});
  }

  std::vector<usage::TenantUsage> records() const {
    std::string error;
    auto db = usage::UsageDatabase::open_for_reading(database(), error);
    std::vector<usage::TenantUsage> loaded;
    EXPECT_TRUE(db && db->load(0, loaded, error)) << error;
    return loaded;
  }

  SimulatedMachine machine_{"4G"};
  TemporaryDirectory dir_;
  TemporaryDirectory ledgers_;
};

TEST_F(Usage, ReportsEachTenantsGpuTimeAndMemoryOverTime) {
  std::unique_ptr<WorkloadProcess> server = start_server();
  const WorkloadRun spin = run_workload(
      kCli, {"--mem", "1G", "--", kSpinner, "--seconds", "0.5", "--kernel-ns", "2000000"},
      tenant_environment("usage-spin"));
  ASSERT_EQ(spin.exit_status, 0) << spin.describe();
  const WorkloadRun hold = run_workload(
      kCli,
      {"--mem", "1G", "--", kAllocator, "--target", "512M", "--chunk", "128M", "--hold", "0.6"},
      tenant_environment("usage-hold"));
  ASSERT_EQ(hold.exit_status, 0) << hold.describe();
  const WorkloadRun stopped = stop(*server);
  ASSERT_EQ(stopped.exit_status, 0) << stopped.describe();

  const WorkloadRun report = usage_report({"--by", "tenant", "--json"});
  ASSERT_EQ(report.exit_status, 0) << report.describe();
  const nlohmann::json json = nlohmann::json::parse(report.out);
  ASSERT_EQ(json["lines"].size(), 2u) << report.out;
  for (const nlohmann::json& line : json["lines"]) {
    EXPECT_EQ(line["tenants"], 1);
    EXPECT_EQ(line["running"], 0);
    const double gpu_seconds = line["gpu_hours"].get<double>() * 3600;
    const double mib_seconds = line["gib_hours"].get<double>() * 3600 * 1024;
    if (line["tenant"] == "usage-spin") {
      EXPECT_GT(gpu_seconds, 0.25) << "it launched for 0.5 s, alone on the device";
      EXPECT_LT(gpu_seconds, 10.0);
    } else {
      EXPECT_EQ(line["tenant"], "usage-hold");
      EXPECT_GE(line["peak_bytes"].get<double>(), 512 * kMiB);
      // 512 MiB for at least 0.6 s, sampled every 0.1 s: most of it seen.
      EXPECT_GT(mib_seconds, 512 * 0.3) << report.out;
      EXPECT_LT(mib_seconds, 1024 * 10.0) << report.out;
    }
  }
  for (const usage::TenantUsage& record : records()) {
    EXPECT_EQ(record.ended, usage::kEndedLeft) << record.tenant;
    EXPECT_FALSE(record.groups.empty());
    EXPECT_NE(record.command.find(record.tenant == "usage-spin" ? "spinner" : "allocator"),
              std::string::npos)
        << record.command;
  }

  const WorkloadRun table = usage_report({});
  ASSERT_EQ(table.exit_status, 0) << table.describe();
  EXPECT_TRUE(table.out.starts_with("USER ")) << table.out;
}

TEST_F(Usage, ASigkilledServerLosesNothingCommittedAndTheNextClosesItsRecords) {
  std::unique_ptr<WorkloadProcess> server = start_server();
  WorkloadProcess tenant(
      kCli,
      {"--mem", "1G", "--", kAllocator, "--target", "256M", "--chunk", "64M", "--hold", "600"},
      tenant_environment("usage-killed"));
  ASSERT_TRUE(tenant.wait_for_output("event=holding", 60s));
  // Samples are saved every 0.1 s: wait until one saw the memory.
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    std::this_thread::sleep_for(100ms);
    for (const usage::TenantUsage& record : records())
      seen = seen || (!record.devices.empty() && record.devices[0].peak_bytes >= 256 * kMiB);
  }
  ASSERT_TRUE(seen) << "no sample of the tenant's memory was saved";
  server->kill_now();
  server->wait(30s);

  EXPECT_EQ(integrity(database()), "ok");
  std::vector<usage::TenantUsage> left = records();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_FALSE(left[0].ended_ns) << "still open: nobody closed it";
  EXPECT_GE(left[0].devices[0].peak_bytes, 256 * kMiB);
  tenant.kill_now();

  std::unique_ptr<WorkloadProcess> next = start_server();
  const WorkloadRun stopped = stop(*next);
  EXPECT_NE(stopped.err.find("1 tenant(s) of an earlier run were still open"), std::string::npos)
      << stopped.err;
  left = records();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].ended, usage::kEndedLost);
  EXPECT_EQ(left[0].ended_ns, left[0].updated_ns);
}

TEST_F(Usage, AFileThatIsNoUsageDatabaseStopsTheServerAndIsLeftAsItWas) {
  const std::string garbage = "not a database\n" + std::string(4096, '#');
  std::ofstream(database(), std::ios::binary) << garbage;
  const WorkloadRun run =
      run_workload(kServer, {"--foreground", "--socket", socket_path(), "--usage-db", database()},
                   machine_.environment());
  EXPECT_EQ(run.exit_status, 1) << run.describe();
  EXPECT_NE(run.err.find("usage database " + database()), std::string::npos) << run.err;
  EXPECT_EQ(read_file(database()), garbage);

  const WorkloadRun report = usage_report({});
  EXPECT_EQ(report.exit_status, 1) << report.describe();
  EXPECT_EQ(report.out, "");
}

}  // namespace
}  // namespace integration
