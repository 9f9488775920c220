// The status schema's JSON mapping: what gpulimitd writes reads back as the
// same structs, and a reply missing a field or with one of the wrong type is
// refused in one line that names the field.
#include <gtest/gtest.h>

#include <string>

#include "gpulimit/protocol/status_json.h"

namespace gpulimit::protocol::status {
namespace {

// Every field set, each optional one both with and without a value.
Report full_report() {
  Report report;
  report.server = {4242, "user",          "/run/user/1000/gpulimit/gpulimitd.sock", 20'000, 12.5,
                   2,    "127.0.0.1:9401"};
  report.devices.push_back({0, "GPU-11223344-5566-7788-99aa-bbccddeeff00", "train-42", 1});
  report.devices.push_back({1, "GPU-11223344-5566-7788-99aa-bbccddeeff01", std::nullopt, 0});
  report.unmanaged.push_back({31337, 1002, "carol", "python3", "/dev/nvidia0"});
  report.memory_totals.push_back({"group", 2000, "ml", 0,
                                  "GPU-11223344-5566-7788-99aa-bbccddeeff00", 42'949'672'960,
                                  3'221'225'472, 4'294'967'296, 1});

  Tenant train;
  train.tenant = "train-42";
  train.number = 1;
  train.uid = 1000;
  train.user = "alice";
  train.pids = {5001, 5002};
  train.command = "python train.py --epochs 10";
  train.sm_percent = 30;
  train.weight = 3;
  train.priority = Priority::kHigh;
  train.devices.push_back({"GPU-11223344-5566-7788-99aa-bbccddeeff00", 3'221'225'472, 8'589'934'592,
                           0.75, 0.74, 9'120'000'000, 2'310'000'000, 412, 411, 0, 3, 0});
  train.devices.push_back({"GPU-11223344-5566-7788-99aa-bbccddeeff01", std::nullopt, std::nullopt,
                           0.5, 0, 0, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                           std::nullopt, std::nullopt});
  train.leader = 5000;
  train.orphaned_s = 12.5;
  train.orphan_kill_in_s = 47.5;
  train.gid = 2000;
  train.group = "ml";
  train.group_share = 3;
  train.user_share = 2;
  report.tenants.push_back(train);

  Tenant idle;
  idle.tenant = "idle";
  idle.number = 2;
  idle.uid = 1001;
  idle.user = "bob";
  idle.priority = Priority::kLow;
  report.tenants.push_back(idle);
  return report;
}

// The text gpulimitd would send for `report`.
std::string text_of(const Report& report) {
  return Json(report).dump();
}

// `json` with the first occurrence of `from` replaced by `to`.
std::string replaced(std::string json, const std::string& from, const std::string& to) {
  const std::size_t at = json.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? json : json.replace(at, from.size(), to);
}

std::string refused(const std::string& json) {
  Report sut;
  sut.server.pid = 99;
  std::string error;
  EXPECT_FALSE(parse_status_report(json, sut, error)) << json;
  EXPECT_EQ(sut.server.pid, 99) << "changed on failure";
  EXPECT_TRUE(error.starts_with("malformed status from gpulimitd: ")) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  return error;
}

TEST(StatusJson, ReadsBackWhatItWrites) {
  const Report written = full_report();

  Report sut;
  std::string error;
  ASSERT_TRUE(parse_status_report(text_of(written), sut, error)) << error;

  EXPECT_EQ(sut, written);
}

TEST(StatusJson, WritesEveryFieldUnderItsNameInTheSchemasOrder) {
  const Json sut = full_report();

  EXPECT_TRUE(text_of(full_report()).starts_with(R"({"server":{"pid":4242,"mode":"user",)"));
  EXPECT_EQ(sut["devices"][1]["holder"], nullptr);
  EXPECT_EQ(sut["tenants"][0]["priority"], "high");
  EXPECT_EQ(sut["tenants"][1]["priority"], "low");
  EXPECT_EQ(sut["tenants"][1]["sm_percent"], nullptr);
  EXPECT_EQ(sut["tenants"][1]["command"], nullptr);
  EXPECT_EQ(sut["tenants"][0]["leader"], 5000);
  EXPECT_EQ(sut["tenants"][0]["orphaned_s"], 12.5);
  EXPECT_EQ(sut["tenants"][0]["orphan_kill_in_s"], 47.5);
  EXPECT_EQ(sut["tenants"][0]["gid"], 2000);
  EXPECT_EQ(sut["tenants"][0]["group"], "ml");
  EXPECT_EQ(sut["tenants"][0]["group_share"], 3);
  EXPECT_EQ(sut["tenants"][0]["user_share"], 2);
  for (const char* name :
       {"leader", "orphaned_s", "orphan_kill_in_s", "gid", "group", "group_share", "user_share"})
    EXPECT_EQ(sut["tenants"][1].at(name), nullptr) << name;
  const Json& uncapped = sut["tenants"][0]["devices"][1];
  for (const char* name :
       {"memory_used", "memory_cap", "wait_ns", "grants", "revokes", "overruns", "overrun_ns",
        "oom_denials"})
    EXPECT_EQ(uncapped.at(name), nullptr) << name;
  std::string total_keys;
  for (const auto& [key, value] : sut["memory_totals"][0].items())
    total_keys += key + " ";
  EXPECT_EQ(total_keys, "scope id name board_index uuid total used promised tenants ");
  std::string keys;
  for (const auto& [key, value] : sut["tenants"][0]["devices"][0].items())
    keys += key + " ";
  EXPECT_EQ(keys,
            "uuid memory_used memory_cap share_target share_achieved held_ns wait_ns grants "
            "revokes overruns oom_denials overrun_ns ");
}

TEST(StatusJson, TheNewerFieldsMayBeAbsent) {
  Json older = full_report();
  older["server"].erase("metrics");
  older.erase("unmanaged");
  older.erase("memory_totals");
  older["tenants"][0].erase("command");
  for (const char* name :
       {"leader", "orphaned_s", "orphan_kill_in_s", "gid", "group", "group_share", "user_share"})
    older["tenants"][0].erase(name);
  for (const char* name : {"wait_ns", "grants", "revokes", "overruns", "overrun_ns", "oom_denials"})
    older["tenants"][0]["devices"][0].erase(name);

  Report sut;
  std::string error;
  ASSERT_TRUE(parse_status_report(older.dump(), sut, error)) << error;

  EXPECT_EQ(sut.server.metrics, std::nullopt);
  EXPECT_TRUE(sut.unmanaged.empty());
  EXPECT_TRUE(sut.memory_totals.empty());
  EXPECT_EQ(sut.tenants.at(0).command, std::nullopt);
  EXPECT_EQ(sut.tenants.at(0).leader, std::nullopt);
  EXPECT_EQ(sut.tenants.at(0).orphaned_s, std::nullopt);
  EXPECT_EQ(sut.tenants.at(0).orphan_kill_in_s, std::nullopt);
  EXPECT_EQ(sut.tenants.at(0).group, std::nullopt);
  EXPECT_EQ(sut.tenants.at(0).group_share, std::nullopt);
  const TenantDevice& device = sut.tenants[0].devices.at(0);
  EXPECT_EQ(device.wait_ns, std::nullopt);
  EXPECT_EQ(device.grants, std::nullopt);
  EXPECT_EQ(device.oom_denials, std::nullopt);
  EXPECT_EQ(device.held_ns, 9'120'000'000u);
}

TEST(StatusJson, AMemoryTotalOfNeitherAGroupNorAUserIsRefused) {
  const std::string error =
      refused(replaced(text_of(full_report()), R"("scope":"group")", R"("scope":"team")"));
  EXPECT_NE(error.find("scope"), std::string::npos) << error;
}

TEST(StatusJson, AMissingFieldIsNamedByItsPath) {
  const std::string json = text_of(full_report());

  EXPECT_EQ(refused(replaced(json, R"("held_ns":9120000000,)", "")),
            "malformed status from gpulimitd: tenants[0].devices[0].held_ns: missing");
  EXPECT_EQ(refused(replaced(json, R"("quantum_us":20000,)", "")),
            "malformed status from gpulimitd: server.quantum_us: missing");
  EXPECT_EQ(refused(replaced(json, R"("waiting":1)", R"("wait":1)")),
            "malformed status from gpulimitd: devices[0].waiting: missing");
  EXPECT_EQ(refused(replaced(json, R"("sm_percent":null,)", "")),
            "malformed status from gpulimitd: tenants[1].sm_percent: missing")
      << "null is a value; only the newer fields may be absent";
  Json without_tenants = full_report();
  without_tenants.erase("tenants");
  EXPECT_EQ(refused(without_tenants.dump()), "malformed status from gpulimitd: tenants: missing");
}

TEST(StatusJson, AFieldOfTheWrongTypeIsNamedWithTheTypes) {
  const std::string json = text_of(full_report());

  EXPECT_EQ(refused(replaced(json, R"("pid":4242)", R"("pid":"4242")")),
            "malformed status from gpulimitd: server.pid: type must be number, but is string");
  EXPECT_EQ(
      refused(replaced(json, R"("pids":[5001,5002])", R"("pids":[5001,null])")),
      "malformed status from gpulimitd: tenants[0].pids[1]: type must be number, but is null");
  EXPECT_EQ(refused(replaced(json, R"("grants":412)", R"("grants":"many")")),
            "malformed status from gpulimitd: tenants[0].devices[0].grants: type must be number, "
            "but is string")
      << "a newer field, when there, is checked as any other";
  EXPECT_EQ(refused(replaced(json, R"("user":"alice")", R"("user":null)")),
            "malformed status from gpulimitd: tenants[0].user: type must be string, but is null");
  Json listless = full_report();
  listless["devices"] = Json::object();
  EXPECT_EQ(refused(listless.dump()),
            "malformed status from gpulimitd: devices: must be a list, but is object");
  EXPECT_EQ(refused(replaced(json, R"("unmanaged":[{)", R"("unmanaged":[7,{)")),
            "malformed status from gpulimitd: unmanaged[0]: must be an object, but is number");
  EXPECT_EQ(refused(replaced(json, R"("priority":"high")", R"("priority":"urgent")")),
            "malformed status from gpulimitd: tenants[0].priority: not a priority (low, normal "
            "or high)");
}

// Found by fuzz/status_json_fuzzer: a fraction too large for the field was
// cast to it, which is undefined behaviour; a number out of the field's
// range was cut down to another value.
TEST(StatusJson, AnIntegerFieldTakesWholeNumbersInItsRangeOnly) {
  const std::string json = text_of(full_report());

  EXPECT_EQ(refused(replaced(json, R"("quantum_us":20000)", R"("quantum_us":1.5e300)")),
            "malformed status from gpulimitd: server.quantum_us: must be a whole number from 0 "
            "to 18446744073709551615, but is 1.5e+300");
  EXPECT_EQ(refused(replaced(json, R"("protocol":2)", R"("protocol":2.5)")),
            "malformed status from gpulimitd: server.protocol: must be a whole number from 0 to "
            "4294967295, but is 2.5");
  EXPECT_EQ(refused(replaced(json, R"("protocol":2)", R"("protocol":4294967298)")),
            "malformed status from gpulimitd: server.protocol: must be a whole number from 0 to "
            "4294967295, but is 4294967298");
  EXPECT_EQ(refused(replaced(json, R"("uid":1000)", R"("uid":-1)")),
            "malformed status from gpulimitd: tenants[0].uid: must be a whole number from 0 to "
            "4294967295, but is -1");
  EXPECT_EQ(refused(replaced(json, R"("pids":[5001,5002])", R"("pids":[5001,1e19])")),
            "malformed status from gpulimitd: tenants[0].pids[1]: must be a whole number from "
            "-9223372036854775808 to 9223372036854775807, but is 1e+19");
  EXPECT_EQ(refused(replaced(json, R"("grants":412)", R"("grants":-412)")),
            "malformed status from gpulimitd: tenants[0].devices[0].grants: must be a whole "
            "number from 0 to 18446744073709551615, but is -412");
}

TEST(StatusJson, AFractionalFieldTakesAnyNumber) {
  const std::string json = text_of(full_report());
  Report sut;
  std::string error;

  ASSERT_TRUE(
      parse_status_report(replaced(json, R"("uptime_s":12.5)", R"("uptime_s":7)"), sut, error))
      << error;
  EXPECT_EQ(sut.server.uptime_s, 7.0);
}

TEST(StatusJson, WhatIsNotJsonOrNotAnObject) {
  EXPECT_NE(refused("").find("parse error"), std::string::npos);
  EXPECT_NE(refused("{\"server\":").find("parse error"), std::string::npos);
  EXPECT_EQ(refused("[]"), "malformed status from gpulimitd: must be an object, but is array");
}

}  // namespace
}  // namespace gpulimit::protocol::status
