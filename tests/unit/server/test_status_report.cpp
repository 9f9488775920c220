// The status JSON: field names, order of kinds, nulls, and the size bound.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpulimit/server/metrics/status_report.h"

namespace gpulimit::server {
namespace {

using protocol::status::BoardDevice;
using protocol::status::Report;
using protocol::status::Tenant;
using protocol::status::TenantDevice;

constexpr const char* kUuid = "GPU-deadbeef-0000-0000-0000-000000000000";

Report snapshot_with_tenants(int count) {
  Report status;
  status.server = {77, "system", "/run/gpulimit/gpulimitd.sock", 20'000, 1.5, 1, {}};
  BoardDevice device;
  device.uuid = kUuid;
  device.holder = "t0";
  device.waiting = 2;
  status.devices.push_back(device);
  for (int i = 0; i < count; ++i) {
    Tenant tenant;
    tenant.tenant = "t" + std::to_string(i);
    tenant.number = static_cast<uint32_t>(i + 1);
    tenant.uid = 1000;
    tenant.user = "alice";
    tenant.pids = {10, 11};
    tenant.command = "python train.py";
    if (i == 0) {
      tenant.sm_percent = 30;
      tenant.gid = 2000;
      tenant.group = "ml";
      tenant.group_share = 3;
      tenant.user_share = 1;
    }
    tenant.weight = 2;
    tenant.priority = protocol::Priority::kLow;
    TenantDevice figures;
    figures.uuid = device.uuid;
    figures.memory_used = i == 0 ? std::optional<uint64_t>(5) : std::nullopt;
    figures.memory_cap = i == 0 ? std::optional<uint64_t>(10) : std::nullopt;
    figures.share_target = 0.3;
    figures.share_achieved = 0.25;
    figures.held_ns = 123;
    figures.wait_ns = 456;
    figures.grants = 7;
    figures.revokes = 6;
    figures.overruns = 1;
    figures.overrun_ns = 89;
    figures.oom_denials = i == 0 ? std::optional<uint64_t>(2) : std::nullopt;
    tenant.devices.push_back(figures);
    status.tenants.push_back(tenant);
  }
  return status;
}

TEST(StatusReport, WritesTheSchema) {
  std::size_t left_out = 99;

  const std::string text = render_status(snapshot_with_tenants(2), 1 << 20, left_out);

  const auto sut = nlohmann::json::parse(text);
  EXPECT_EQ(left_out, 0u);
  EXPECT_EQ(sut["server"], nlohmann::json::parse(
                               R"({"pid":77,"mode":"system","socket":"/run/gpulimit/gpulimitd.sock",
                                     "quantum_us":20000,"uptime_s":1.5,"protocol":1,
                                     "metrics":null})"));
  EXPECT_EQ(sut["devices"], nlohmann::json::parse(R"([{"board_index":0,
      "uuid":"GPU-deadbeef-0000-0000-0000-000000000000","holder":"t0","waiting":2}])"));
  EXPECT_EQ(sut["tenants"][0], nlohmann::json::parse(R"({"tenant":"t0","number":1,"uid":1000,
      "user":"alice","pids":[10,11],"command":"python train.py","sm_percent":30,"weight":2,
      "priority":"low",
      "devices":[{"uuid":"GPU-deadbeef-0000-0000-0000-000000000000","memory_used":5,
                  "memory_cap":10,"share_target":0.3,"share_achieved":0.25,"held_ns":123,
                  "wait_ns":456,"grants":7,"revokes":6,"overruns":1,"oom_denials":2,
                  "overrun_ns":89}],
      "leader":null,"orphaned_s":null,"orphan_kill_in_s":null,
      "gid":2000,"group":"ml","group_share":3,"user_share":1})"));
  EXPECT_TRUE(sut["tenants"][1]["group"].is_null()) << "a tenant the tree does not place";
  EXPECT_TRUE(sut["tenants"][1]["sm_percent"].is_null());
  EXPECT_TRUE(sut["tenants"][1]["devices"][0]["memory_used"].is_null());
  EXPECT_TRUE(sut["tenants"][1]["devices"][0]["memory_cap"].is_null());
  EXPECT_TRUE(sut["tenants"][1]["devices"][0]["oom_denials"].is_null());
  EXPECT_TRUE(text.starts_with(R"({"server":)")) << "the schema's order";
}

// Byte for byte what gpulimitd wrote before the schema had structs of its
// own, with the newer fields appended: operators' scripts read it.
TEST(StatusReport, WritesTheSameBytesAsEver) {
  Report status = snapshot_with_tenants(2);
  status.server.protocol = 2;
  status.server.metrics = "127.0.0.1:9401";
  BoardDevice second;
  second.board_index = 1;
  second.uuid = "GPU-01020300-0000-0000-0000-000000000000";
  status.devices.push_back(second);
  status.unmanaged.push_back({31337, 1002, "carol", "python3", "/dev/nvidia0"});
  status.tenants[1].command = "";
  status.tenants[1].priority = protocol::Priority::kHigh;
  Tenant idle;
  idle.tenant = "idle";
  idle.user = "bob";
  idle.command = "";
  status.tenants.push_back(idle);
  std::size_t left_out = 99;

  const std::string sut = render_status(status, 1 << 20, left_out);

  EXPECT_EQ(left_out, 0u);
  EXPECT_EQ(
      sut,
      R"({"server":{"pid":77,"mode":"system","socket":"/run/gpulimit/gpulimitd.sock",)"
      R"("quantum_us":20000,"uptime_s":1.5,"protocol":2,"metrics":"127.0.0.1:9401"},)"
      R"("devices":[{"board_index":0,"uuid":"GPU-deadbeef-0000-0000-0000-000000000000",)"
      R"("holder":"t0","waiting":2},{"board_index":1,"uuid":"GPU-01020300-0000-0000-0000-000000000000",)"
      R"("holder":null,"waiting":0}],"unmanaged":[{"pid":31337,"uid":1002,"user":"carol",)"
      R"("command":"python3","device":"/dev/nvidia0"}],"memory_totals":[],"tenants":[{"tenant":"t0",)"
      R"("number":1,"uid":1000,"user":"alice","pids":[10,11],"command":"python train.py",)"
      R"("sm_percent":30,"weight":2,"priority":"low","devices":[{"uuid":"GPU-deadbeef-0000-0000-0000-000000000000",)"
      R"("memory_used":5,"memory_cap":10,"share_target":0.3,"share_achieved":0.25,)"
      R"("held_ns":123,"wait_ns":456,"grants":7,"revokes":6,"overruns":1,"oom_denials":2,)"
      R"("overrun_ns":89}],)"
      R"("leader":null,"orphaned_s":null,"orphan_kill_in_s":null,)"
      R"("gid":2000,"group":"ml","group_share":3,"user_share":1},)"
      R"({"tenant":"t1","number":2,"uid":1000,"user":"alice","pids":[10,11],"command":"",)"
      R"("sm_percent":null,"weight":2,"priority":"high","devices":[{"uuid":"GPU-deadbeef-0000-0000-0000-000000000000",)"
      R"("memory_used":null,"memory_cap":null,"share_target":0.3,"share_achieved":0.25,)"
      R"("held_ns":123,"wait_ns":456,"grants":7,"revokes":6,"overruns":1,"oom_denials":null,)"
      R"("overrun_ns":89}],)"
      R"("leader":null,"orphaned_s":null,"orphan_kill_in_s":null,"gid":null,"group":null,)"
      R"("group_share":null,"user_share":null},)"
      R"({"tenant":"idle","number":0,"uid":0,"user":"bob","pids":[],"command":"",)"
      R"("sm_percent":null,"weight":1,"priority":"normal","devices":[],)"
      R"("leader":null,"orphaned_s":null,"orphan_kill_in_s":null,"gid":null,"group":null,)"
      R"("group_share":null,"user_share":null}]})");
}

TEST(StatusReport, NamesTheMetricsAddressWhenServing) {
  Report status = snapshot_with_tenants(0);
  status.server.metrics = "127.0.0.1:9401";
  std::size_t left_out = 0;

  const auto sut = nlohmann::json::parse(render_status(status, 1 << 20, left_out));

  EXPECT_EQ(sut["server"]["metrics"], "127.0.0.1:9401");
}

TEST(StatusReport, ReplacesInvalidUtf8InACommand) {
  Report status = snapshot_with_tenants(1);
  status.tenants[0].command = "python \xff\xfe";
  std::size_t left_out = 0;

  const std::string text = render_status(status, 1 << 20, left_out);

  const auto sut = nlohmann::json::parse(text);
  EXPECT_TRUE(sut["tenants"][0]["command"].get<std::string>().starts_with("python "));
}

TEST(StatusReport, LeavesTenantsOutToFitTheMessage) {
  const Report status = snapshot_with_tenants(50);
  std::size_t left_out = 0;
  const std::size_t whole = render_status(status, 1 << 20, left_out).size();

  const std::string text = render_status(status, whole / 2, left_out);

  EXPECT_LE(text.size(), whole / 2);
  EXPECT_GT(left_out, 20u);
  const auto sut = nlohmann::json::parse(text);
  EXPECT_EQ(sut["tenants"].size(), 50 - left_out);
}

TEST(StatusReport, NamesUuidsAsNvidiaSmiDoes) {
  DeviceUuid uuid;
  for (int i = 0; i < 16; ++i)
    uuid[i] = static_cast<unsigned char>(0x10 * (i % 16) + i);

  EXPECT_EQ(format_gpu_uuid(uuid), "GPU-00112233-4455-6677-8899-aabbccddeeff");
}

}  // namespace
}  // namespace gpulimit::server
