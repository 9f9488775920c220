// The status JSON: field names, order of kinds, nulls, and the size bound.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpulimit/server/metrics/status_report.h"

namespace gpulimit::server {
namespace {

StatusSnapshot snapshot_with_tenants(int count) {
  StatusSnapshot status;
  status.server = ServerStatus{77, "system", "/run/gpulimit/gpulimitd.sock", 20'000, 1.5, 1, {}};
  BoardDeviceStatus device;
  device.uuid = {0xde, 0xad, 0xbe, 0xef};
  device.holder = "t0";
  device.waiting = 2;
  status.devices.push_back(device);
  for (int i = 0; i < count; ++i) {
    TenantStatus tenant;
    tenant.tenant = "t" + std::to_string(i);
    tenant.number = static_cast<uint32_t>(i + 1);
    tenant.uid = 1000;
    tenant.user = "alice";
    tenant.pids = {10, 11};
    tenant.command = "python train.py";
    tenant.share = ComputeShare{i == 0 ? 30u : 0u, 2, protocol::Priority::kLow};
    TenantDeviceStatus figures;
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
                  "wait_ns":456,"grants":7,"revokes":6,"overruns":1,"oom_denials":2}]})"));
  EXPECT_TRUE(sut["tenants"][1]["sm_percent"].is_null());
  EXPECT_TRUE(sut["tenants"][1]["devices"][0]["memory_used"].is_null());
  EXPECT_TRUE(sut["tenants"][1]["devices"][0]["memory_cap"].is_null());
  EXPECT_TRUE(sut["tenants"][1]["devices"][0]["oom_denials"].is_null());
  EXPECT_TRUE(text.starts_with(R"({"server":)")) << "the schema's order";
}

TEST(StatusReport, NamesTheMetricsAddressWhenServing) {
  StatusSnapshot status = snapshot_with_tenants(0);
  status.server.metrics = "127.0.0.1:9401";
  std::size_t left_out = 0;

  const auto sut = nlohmann::json::parse(render_status(status, 1 << 20, left_out));

  EXPECT_EQ(sut["server"]["metrics"], "127.0.0.1:9401");
}

TEST(StatusReport, ReplacesInvalidUtf8InACommand) {
  StatusSnapshot status = snapshot_with_tenants(1);
  status.tenants[0].command = "python \xff\xfe";
  std::size_t left_out = 0;

  const std::string text = render_status(status, 1 << 20, left_out);

  const auto sut = nlohmann::json::parse(text);
  EXPECT_TRUE(sut["tenants"][0]["command"].get<std::string>().starts_with("python "));
}

TEST(StatusReport, LeavesTenantsOutToFitTheMessage) {
  const StatusSnapshot status = snapshot_with_tenants(50);
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
