// gpulimit top reads gpulimitd's status JSON through the status schema's
// mapping: the newer per-tenant figures are optional, so servers from before
// them still show.
#include <gtest/gtest.h>

#include <string>

#include "gpulimit/protocol/status_json.h"

namespace gpulimit::cli {
namespace {

using protocol::status::parse_status_report;
using protocol::status::Report;
using protocol::status::Tenant;
using protocol::status::TenantDevice;

const std::string kServer = R"("server": {"pid": 7, "mode": "user", "socket": "/s",
                                          "quantum_us": 20000, "uptime_s": 1.5, "protocol": 1})";

std::string status_with_device(const std::string& device_fields,
                               const std::string& tenant_fields = "") {
  return "{" + kServer + R"(, "devices": [], "tenants": [
      {"tenant": "t", "number": 0, "uid": 1000, "user": "alice", "pids": [10, 11],
       "sm_percent": null, "weight": 1, "priority": "normal")" +
         tenant_fields + R"(,
       "devices": [{"uuid": "GPU-a", "memory_used": 5, "memory_cap": 10, "share_target": 0.5,
                    "share_achieved": 0.25, "held_ns": 3)" +
         device_fields + "}]}]}";
}

Report parsed(const std::string& json) {
  Report snapshot;
  std::string error;
  EXPECT_TRUE(parse_status_report(json, snapshot, error)) << error;
  return snapshot;
}

std::string refused(const std::string& json) {
  Report snapshot;
  snapshot.server.pid = 99;
  std::string error;
  EXPECT_FALSE(parse_status_report(json, snapshot, error));
  EXPECT_EQ(snapshot.server.pid, 99) << "changed on failure";
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  return error;
}

TEST(TopSnapshot, AServerFromBeforeTheNewFieldsLeavesThemUnknown) {
  const Report sut = parsed(status_with_device(""));

  ASSERT_EQ(sut.tenants.size(), 1u);
  const Tenant& tenant = sut.tenants[0];
  EXPECT_EQ(tenant.user, "alice");
  EXPECT_EQ(tenant.command, std::nullopt);
  EXPECT_EQ(tenant.pids, (std::vector<int64_t>{10, 11}));
  ASSERT_EQ(tenant.devices.size(), 1u);
  const TenantDevice& device = tenant.devices[0];
  EXPECT_EQ(device.memory_used, 5u);
  EXPECT_EQ(device.memory_cap, 10u);
  EXPECT_DOUBLE_EQ(device.share_achieved, 0.25);
  EXPECT_EQ(device.wait_ns, std::nullopt);
  EXPECT_EQ(device.grants, std::nullopt);
  EXPECT_EQ(device.revokes, std::nullopt);
  EXPECT_EQ(device.overruns, std::nullopt);
  EXPECT_EQ(device.oom_denials, std::nullopt);
}

TEST(TopSnapshot, TheNewFieldsWhenTheServerSendsThem) {
  const Report sut = parsed(status_with_device(
      R"(, "wait_ns": 1500000000, "grants": 4, "revokes": 3, "overruns": 1, "oom_denials": 2)",
      R"(, "command": "python train.py")"));

  const TenantDevice& device = sut.tenants.at(0).devices.at(0);
  EXPECT_EQ(sut.tenants[0].command, "python train.py");
  EXPECT_EQ(device.wait_ns, 1'500'000'000u);
  EXPECT_EQ(device.grants, 4u);
  EXPECT_EQ(device.revokes, 3u);
  EXPECT_EQ(device.overruns, 1u);
  EXPECT_EQ(device.oom_denials, 2u);
}

TEST(TopSnapshot, NullMeansUnknownToo) {
  const Report sut = parsed(
      status_with_device(R"(, "wait_ns": null, "oom_denials": null)", R"(, "command": null)"));

  EXPECT_EQ(sut.tenants.at(0).command, std::nullopt);
  EXPECT_EQ(sut.tenants[0].devices.at(0).wait_ns, std::nullopt);
  EXPECT_EQ(sut.tenants[0].devices[0].oom_denials, std::nullopt);
}

TEST(TopSnapshot, TheServerAndItsDevices) {
  const Report sut = parsed("{" + kServer + R"(, "devices": [
      {"board_index": 1, "uuid": "GPU-b", "holder": "t", "waiting": 2},
      {"board_index": 0, "uuid": "GPU-a", "holder": null, "waiting": 0}], "tenants": []})");

  EXPECT_EQ(sut.server.pid, 7);
  EXPECT_EQ(sut.server.mode, "user");
  EXPECT_EQ(sut.server.quantum_us, 20000u);
  EXPECT_DOUBLE_EQ(sut.server.uptime_s, 1.5);
  ASSERT_EQ(sut.devices.size(), 2u);
  EXPECT_EQ(sut.devices[0].board_index, 1u);
  EXPECT_EQ(sut.devices[0].holder, "t");
  EXPECT_EQ(sut.devices[0].waiting, 2u);
  EXPECT_EQ(sut.devices[1].holder, std::nullopt);
}

TEST(TopSnapshot, RefusesWhatIsNotTheSchemaInOneLine) {
  EXPECT_NE(refused("").find("malformed status from gpulimitd: "), std::string::npos);
  EXPECT_NE(refused("[]").find("malformed status from gpulimitd: "), std::string::npos);
  EXPECT_NE(refused("{}").find("server"), std::string::npos);
  EXPECT_NE(refused("{" + kServer + R"(, "devices": {}, "tenants": []})").find("devices"),
            std::string::npos);
  // A new field of the wrong type is an error, not an unknown.
  EXPECT_NE(refused(status_with_device(R"(, "wait_ns": "soon")")).find("number"),
            std::string::npos);
  EXPECT_NE(refused(status_with_device("", R"(, "command": 5)")).find("string"), std::string::npos);
  // The fields every server sends are required.
  EXPECT_NE(refused(R"({"server": {"pid": 7, "mode": "user", "socket": "/s",
                                   "quantum_us": 20000, "uptime_s": 1.5, "protocol": 1},
                        "devices": [], "tenants": [
      {"tenant": "t", "number": 0, "uid": 1000, "user": "u", "pids": [], "sm_percent": null,
       "weight": 1, "priority": "normal", "devices": [{"uuid": "GPU-a",
       "memory_cap": 1, "share_target": 0, "share_achieved": 0, "held_ns": 0}]}]})")
                .find("memory_used"),
            std::string::npos);
}

}  // namespace
}  // namespace gpulimit::cli
