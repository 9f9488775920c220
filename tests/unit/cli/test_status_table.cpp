// gpulimit status's tables, from status JSON as gpulimitd sends it: no
// server needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>

#include "status/status_table.h"

namespace gpulimit::cli {
namespace {

// Two devices; one tenant on both, holding device 0, one waiting for it,
// and one that has not used a device yet.
constexpr const char* kStatus = R"({
  "server": {"pid": 4242, "mode": "user", "socket": "/run/user/1000/gpulimit/gpulimitd.sock",
             "quantum_us": 20000, "uptime_s": 3725.4, "protocol": 1},
  "devices": [
    {"board_index": 0, "uuid": "GPU-fa4ec0da-0000-4000-8000-000000000000",
     "holder": "1000-4242-0123456789abcdef", "waiting": 1},
    {"board_index": 1, "uuid": "GPU-fa4ec0da-0000-4000-8000-000000000001",
     "holder": null, "waiting": 0}
  ],
  "tenants": [
    {"tenant": "1000-4242-0123456789abcdef", "number": 0, "uid": 1000, "user": "alice",
     "pids": [4242, 4250], "sm_percent": 30, "weight": 2, "priority": "high",
     "devices": [
       {"uuid": "GPU-fa4ec0da-0000-4000-8000-000000000000", "memory_used": 3435973837,
        "memory_cap": 10737418240, "share_target": 0.3, "share_achieved": 0.2961,
        "held_ns": 1000000000},
       {"uuid": "GPU-fa4ec0da-0000-4000-8000-000000000001", "memory_used": 536870912,
        "memory_cap": null, "share_target": 0.3, "share_achieved": 0.0,
        "held_ns": 0}
     ]},
    {"tenant": "train-42", "number": 1, "uid": 1001, "user": "bob", "pids": [5000],
     "sm_percent": null, "weight": 1, "priority": "normal",
     "devices": [
       {"uuid": "GPU-fa4ec0da-0000-4000-8000-000000000000", "memory_used": null,
        "memory_cap": 8589934592, "share_target": 0.7, "share_achieved": 0.704,
        "held_ns": 2500000000}
     ]},
    {"tenant": "idle", "number": 2, "uid": 1001, "user": "bob", "pids": [],
     "sm_percent": null, "weight": 1, "priority": "low", "devices": []}
  ]
})";

std::string render(const std::string& json) {
  std::string out;
  std::string error;
  EXPECT_TRUE(render_status_table(json, out, error)) << error;
  return out;
}

std::string render_error(const std::string& json) {
  std::string out = "untouched";
  std::string error;
  EXPECT_FALSE(render_status_table(json, out, error)) << out;
  EXPECT_EQ(out, "untouched");
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  return error;
}

TEST(StatusTable, ShowsTheServerItsDevicesAndATenantRowPerDevice) {
  EXPECT_EQ(
      render(kStatus),
      "gpulimitd 4242, user mode, up 1h 02m, quantum 20 ms, socket "
      "/run/user/1000/gpulimit/gpulimitd.sock\n"
      "\n"
      "DEVICE  UUID                                      HOLDER                      WAITING\n"
      "0       GPU-fa4ec0da-0000-4000-8000-000000000000  1000-4242-0123456789abcdef  1\n"
      "1       GPU-fa4ec0da-0000-4000-8000-000000000001  -                           0\n"
      "\n"
      "TENANT                      USER   PIDS       SM   WEIGHT  PRIORITY  DEVICE  "
      "MEMORY USED / CAP  TARGET SHARE  ACHIEVED\n"
      "1000-4242-0123456789abcdef  alice  4242,4250  30%  2       high      0       "
      "3.2 GiB / 10 GiB   30.0%         29.6%\n"
      "                                                                     1       "
      "512 MiB / no cap   30.0%         0.0%\n"
      "train-42                    bob    5000       -    1       normal    0       "
      "- / 8 GiB          70.0%         70.4%\n"
      "idle                        bob    -          -    1       low       -       "
      "-                  -             -\n");
}

TEST(StatusTable, AServerWithoutTenants) {
  EXPECT_EQ(
      render(R"({"server": {"pid": 7, "mode": "system", "socket": "/run/gpulimit/gpulimitd.sock",
                                  "quantum_us": 2500, "uptime_s": 59.9, "protocol": 1},
                       "devices": [], "tenants": []})"),
      "gpulimitd 7, system mode, up 59s, quantum 2.5 ms, socket "
      "/run/gpulimit/gpulimitd.sock\n"
      "\n"
      "no tenants\n");
}

TEST(StatusTable, ProcessesUsingAGpuWithoutGpulimitFollowTheTenants) {
  EXPECT_EQ(
      render(R"({"server": {"pid": 7, "mode": "system", "socket": "/run/gpulimit/gpulimitd.sock",
                            "quantum_us": 2500, "uptime_s": 59.9, "protocol": 2},
                 "devices": [], "tenants": [],
                 "unmanaged": [{"pid": 31337, "uid": 1002, "user": "carol",
                                "command": "python3", "device": "/dev/nvidia0"}]})"),
      "gpulimitd 7, system mode, up 59s, quantum 2.5 ms, socket "
      "/run/gpulimit/gpulimitd.sock\n"
      "\n"
      "no tenants\n"
      "\n"
      "UNMANAGED PID  USER   COMMAND  DEVICE\n"
      "31337          carol  python3  /dev/nvidia0\n");
  EXPECT_NE(render_error(R"({"server": {"pid": 7, "mode": "system", "socket": "s",
                                        "quantum_us": 2500, "uptime_s": 1, "protocol": 2},
                             "devices": [], "tenants": [], "unmanaged": [{"pid": 1}]})"),
            "");
}

TEST(StatusTable, OrphansFollowTheTenantsWithWhenTheirMainProcessWentAndWhenTheyAreKilled) {
  const std::string sut = render(R"({
    "server": {"pid": 7, "mode": "system", "socket": "/run/gpulimit/gpulimitd.sock",
               "quantum_us": 2500, "uptime_s": 59.9, "protocol": 3},
    "devices": [],
    "tenants": [
      {"tenant": "led", "number": 1, "uid": 1000, "user": "alice", "pids": [10],
       "sm_percent": null, "weight": 1, "priority": "normal", "devices": [],
       "leader": 9, "orphaned_s": null, "orphan_kill_in_s": null},
      {"tenant": "left", "number": 2, "uid": 1000, "user": "alice", "pids": [21, 22],
       "sm_percent": null, "weight": 1, "priority": "normal", "devices": [],
       "leader": 20, "orphaned_s": 75.2, "orphan_kill_in_s": null},
      {"tenant": "doomed", "number": 3, "uid": 1001, "user": "bob", "pids": [31],
       "sm_percent": null, "weight": 1, "priority": "normal", "devices": [],
       "leader": 30, "orphaned_s": 5.0, "orphan_kill_in_s": 55.0}
    ]})");

  EXPECT_NE(sut.find("ORPHAN  USER   MAIN PID  EXITED      STILL RUNNING  KILLED IN\n"
                     "left    alice  20        1m 15s ago  21,22          never\n"
                     "doomed  bob    30        5s ago      31             55s\n"),
            std::string::npos)
      << sut;
  EXPECT_EQ(sut.find("\nled "), sut.rfind("\nled ")) << "a tenant whose leader runs is no orphan";
}

TEST(StatusTable, TheFairShareTreeFollowsTheTenantsWhenThereIsOneToShow) {
  const std::string head = R"({
    "server": {"pid": 7, "mode": "system", "socket": "/run/gpulimit/gpulimitd.sock",
               "quantum_us": 20000, "uptime_s": 5, "protocol": 3},
    "devices": [],
    "tenants": [)";
  const std::string a = R"(
      {"tenant": "a", "number": 1, "uid": 1000, "user": "alice", "pids": [10],
       "sm_percent": null, "weight": 1, "priority": "normal", "devices": [],
       "gid": 2000, "group": "ml", "group_share": 3, "user_share": 1})";
  const std::string b = R"(
      {"tenant": "b", "number": 2, "uid": 1000, "user": "alice", "pids": [11],
       "sm_percent": null, "weight": 1, "priority": "normal", "devices": [],
       "gid": 2000, "group": "ml", "group_share": 3, "user_share": 1})";
  const std::string c = R"(
      {"tenant": "c", "number": 3, "uid": 1002, "user": "carol", "pids": [12],
       "sm_percent": null, "weight": 1, "priority": "normal", "devices": [],
       "gid": 2001, "group": "vision", "group_share": 1, "user_share": 2})";

  const std::string sut = render(head + a + "," + b + "," + c + "]}");

  EXPECT_NE(sut.find("GROUP   GROUP SHARE  USER   USER SHARE  TENANTS\n"
                     "ml      3            alice  1           a,b\n"
                     "vision  1            carol  2           c\n"),
            std::string::npos)
      << sut;
  const std::string one_branch = render(head + R"(
      {"tenant": "a", "number": 1, "uid": 1000, "user": "alice", "pids": [10],
       "sm_percent": null, "weight": 1, "priority": "normal", "devices": [],
       "gid": 2000, "group": "ml", "group_share": 1, "user_share": 1}]})");
  EXPECT_EQ(one_branch.find("GROUP SHARE"), std::string::npos) << "nothing to split";
}

TEST(StatusTable, MemoryTotalsFollowTheTenantsWithWhatIsUsedAndLeased) {
  const std::string sut = render(R"({
    "server": {"pid": 7, "mode": "system", "socket": "/run/gpulimit/gpulimitd.sock",
               "quantum_us": 20000, "uptime_s": 5, "protocol": 4},
    "devices": [],
    "memory_totals": [
      {"scope": "group", "id": 2000, "name": "ml", "board_index": 0,
       "uuid": "GPU-fa4ec0da-0000-4000-8000-000000000000", "total": 42949672960,
       "used": 3221225472, "promised": 4294967296, "tenants": 2},
      {"scope": "user", "id": 1000, "name": "alice", "board_index": null,
       "uuid": null, "total": 10737418240,
       "used": 0, "promised": 0, "tenants": 1}],
    "tenants": []})");

  EXPECT_NE(sut.find("TOTAL OF    GPU  USED   LEASED  TOTAL   TENANTS\n"
                     "group ml    0    3 GiB  4 GiB   40 GiB  2\n"
                     "user alice  all  0 B    0 B     10 GiB  1\n"),
            std::string::npos)
      << sut;
  EXPECT_EQ(render(R"({"server": {"pid": 7, "mode": "user", "socket": "/s", "quantum_us": 1,
                               "uptime_s": 5, "protocol": 3},
                    "devices": [], "tenants": []})")
                .find("TOTAL OF"),
            std::string::npos)
      << "an older server or no totals: no table";
}

TEST(StatusTable, UptimeAndQuantumInTheirLargestUnits) {
  const auto server_line = [](const std::string& uptime, const std::string& quantum) {
    const std::string text = render(R"({"server": {"pid": 1, "mode": "user", "socket": "/s",
                                                   "quantum_us": )" +
                                    quantum + R"(, "uptime_s": )" + uptime +
                                    R"(, "protocol": 1}, "devices": [], "tenants": []})");
    return text.substr(0, text.find('\n'));
  };
  EXPECT_EQ(server_line("0", "500"), "gpulimitd 1, user mode, up 0s, quantum 500 us, socket /s");
  EXPECT_EQ(server_line("61", "1000"),
            "gpulimitd 1, user mode, up 1m 01s, quantum 1 ms, socket /s");
  EXPECT_EQ(server_line("90061", "50000"),
            "gpulimitd 1, user mode, up 1d 01h, quantum 50 ms, socket /s");
}

TEST(StatusTable, ADeviceNotInTheDeviceListIsShownByItsUuid) {
  const std::string text = render(R"({
    "server": {"pid": 1, "mode": "user", "socket": "/s", "quantum_us": 20000, "uptime_s": 1,
               "protocol": 1},
    "devices": [],
    "tenants": [{"tenant": "t", "number": 0, "uid": 0, "user": "root", "pids": [1],
                 "sm_percent": 100, "weight": 1000, "priority": "low",
                 "devices": [{"uuid": "GPU-abc", "memory_used": 0, "memory_cap": 1023,
                              "share_target": 1, "share_achieved": 1, "held_ns": 5}]}]})");
  EXPECT_NE(text.find("t       root  1     100%  1000    low       GPU-abc  0 B / 1023 B"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("100.0%"), std::string::npos) << text;
}

TEST(StatusTable, RefusesWhatIsNotTheSchemaInOneLine) {
  EXPECT_NE(render_error("").find("malformed status from gpulimitd: "), std::string::npos);
  EXPECT_NE(render_error("not json").find("malformed status from gpulimitd: "), std::string::npos);
  EXPECT_NE(render_error("{}").find("server"), std::string::npos);
  const std::string server = R"("server": {"pid": 1, "mode": "user", "socket": "/s",
                                          "quantum_us": 1, "uptime_s": 1, "protocol": 1})";
  EXPECT_NE(render_error("{" + server + "}").find("devices"), std::string::npos);
  EXPECT_NE(render_error("{" + server + R"(, "devices": {}, "tenants": []})")
                .find("devices: must be a list"),
            std::string::npos);
  EXPECT_NE(render_error(R"({"server": {"pid": "one", "mode": "user", "socket": "/s",
                                        "quantum_us": 1, "uptime_s": 1, "protocol": 1},
                             "devices": [], "tenants": []})")
                .find("type must be number"),
            std::string::npos);
  // A tenant without its memory figures.
  EXPECT_NE(render_error("{" + server + R"(, "devices": [], "tenants": [
                {"tenant": "t", "number": 0, "uid": 0, "user": "u", "pids": [], "sm_percent": null,
                 "weight": 1, "priority": "normal",
                 "devices": [{"uuid": "GPU-x", "share_target": 0, "share_achieved": 0,
                              "held_ns": 0}]}]})")
                .find("memory_used"),
            std::string::npos);
}

TEST(FormatBytes, LargestBinaryUnitToOneDecimal) {
  const std::pair<uint64_t, const char*> cases[] = {
      {0, "0 B"},
      {1023, "1023 B"},
      {1024, "1 KiB"},
      {1536, "1.5 KiB"},
      {uint64_t{512} << 20, "512 MiB"},
      {uint64_t{10} << 30, "10 GiB"},
      {3435973837, "3.2 GiB"},
      {(uint64_t{1} << 30) - 1, "1 GiB"},  // 1023.99999 MiB, shown rounded
      {uint64_t{3} << 40, "3 TiB"},
      {UINT64_MAX, "16 EiB"},
  };
  for (const auto& [bytes, text] : cases)
    EXPECT_EQ(format_bytes(bytes), text) << bytes;
}

}  // namespace
}  // namespace gpulimit::cli
