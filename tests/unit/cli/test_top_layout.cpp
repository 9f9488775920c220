// gpulimit top's picture of a status snapshot: columns, widths, bars,
// sorting and cutting to the terminal's width, from a fixed snapshot.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpulimit/protocol/status_json.h"
#include "top/top_layout.h"

namespace gpulimit::cli {
namespace {

// Two devices. alice's tenant uses both (capped on device 0 only) and holds
// device 0; bob's train-42 is at its cap on device 0 and its server says
// nothing of waits, OOM denials or its command (a server from before those
// fields); bob's idle tenant uses no device yet.
constexpr const char* kStatus = R"({
  "server": {"pid": 4242, "mode": "user", "socket": "/run/user/1000/gpulimit/gpulimitd.sock",
             "quantum_us": 20000, "uptime_s": 3725.4, "protocol": 1, "metrics": null},
  "devices": [
    {"board_index": 0, "uuid": "GPU-fa4ec0da-0000-4000-8000-000000000000",
     "holder": "1000-4242-0123456789abcdef", "waiting": 1},
    {"board_index": 1, "uuid": "GPU-fa4ec0da-0000-4000-8000-000000000001",
     "holder": null, "waiting": 0}
  ],
  "tenants": [
    {"tenant": "1000-4242-0123456789abcdef", "number": 0, "uid": 1000, "user": "alice",
     "command": "python train.py --epochs 90 --batch-size 256",
     "pids": [4242, 4250, 4251], "sm_percent": 30, "weight": 2, "priority": "high",
     "devices": [
       {"uuid": "GPU-fa4ec0da-0000-4000-8000-000000000000", "memory_used": 3435973837,
        "memory_cap": 10737418240, "share_target": 0.3, "share_achieved": 0.2961,
        "held_ns": 1000000000, "wait_ns": 12345000000, "grants": 100, "revokes": 99,
        "overruns": 2, "oom_denials": 3},
       {"uuid": "GPU-fa4ec0da-0000-4000-8000-000000000001", "memory_used": 536870912,
        "memory_cap": null, "share_target": 0.3, "share_achieved": 0.0,
        "held_ns": 0, "wait_ns": 0, "grants": 0, "revokes": 0, "overruns": 0,
        "oom_denials": null}
     ]},
    {"tenant": "train-42", "number": 1, "uid": 1001, "user": "bob", "pids": [5000],
     "sm_percent": null, "weight": 1, "priority": "normal",
     "devices": [
       {"uuid": "GPU-fa4ec0da-0000-4000-8000-000000000000", "memory_used": 8589934592,
        "memory_cap": 8589934592, "share_target": 0.7, "share_achieved": 0.704,
        "held_ns": 2500000000}
     ]},
    {"tenant": "idle", "number": 2, "uid": 1001, "user": "bob", "command": "sleep 1000",
     "pids": [], "sm_percent": null, "weight": 1, "priority": "low", "devices": []}
  ]
})";

TopFrameInput input_of(const std::string& json, TopSortKey sort = TopSortKey::kMemory) {
  TopFrameInput input;
  protocol::status::Report snapshot;
  std::string error;
  EXPECT_TRUE(protocol::status::parse_status_report(json, snapshot, error)) << error;
  input.snapshot = snapshot;
  input.clock = "12:00:00";
  input.sort = sort;
  return input;
}

std::string joined(const TopFrame& frame) {
  std::string text;
  for (const std::string& line : frame.lines)
    text += line + "\n";
  return text;
}

TopRow row(const std::string& tenant, const std::string& user, std::optional<uint64_t> memory,
           std::optional<double> share, std::optional<uint64_t> wait, std::optional<uint64_t> oom) {
  TopRow out;
  out.tenant = tenant;
  out.user = user;
  out.memory_used = memory;
  out.share_achieved = share;
  out.wait_ns = wait;
  out.oom_denials = oom;
  return out;
}

std::vector<std::string> tenants_of(const std::vector<TopRow>& rows) {
  std::vector<std::string> names;
  for (const TopRow& r : rows)
    names.push_back(r.tenant);
  return names;
}

TEST(TopFrame, At120ColumnsEveryColumnShows) {
  const TopFrameInput sut = input_of(kStatus);

  const TopFrame frame = render_top_frame(sut, 120);

  EXPECT_EQ(
      joined(frame),
      "top 12:00:00  gpulimitd 4242 user mode, up 1h02m, quantum 20ms, 3 tenants\n"
      "sort: m memory  s share  w wait  u user  o OOM   q quit   sorted by memory\n"
      "USER  TENANT                     PIDS            MEM/CAP MEMORY       SHARE/TGT  WAIT OOM "
      "COMMAND\n"
      "GPU 0 GPU-fa4ec0da-0000-4000-8000-000000000000, held by 1000-4242-0123456789abcdef, 1 "
      "waiting\n"
      "bob   train-42                   5000              8G/8G [##########]   70%/70%     -   - "
      "-\n"
      "alice 1000-4242-0123456789abcdef 4242,4250,4251 3.2G/10G [###.......]   30%/30% 12.3s   3 "
      "python train.py --epochs 90 -+\n"
      "GPU 1 GPU-fa4ec0da-0000-4000-8000-000000000001, token free, 0 waiting\n"
      "alice 1000-4242-0123456789abcdef 4242,4250,4251   512M/- [  no cap  ]    0%/30%    0s   - "
      "python train.py --epochs 90 -+\n"
      "no device yet\n"
      "bob   idle                       -                     -                    -/-     -   - "
      "sleep 1000\n");
  EXPECT_TRUE(frame.has_heading);
  EXPECT_EQ(frame.heading_line, 2u);
}

TEST(TopFrame, At80ColumnsTheTenantIdAndLongUuidsGo) {
  const TopFrameInput sut = input_of(kStatus);

  const TopFrame frame = render_top_frame(sut, 80);

  EXPECT_EQ(joined(frame),
            "top 12:00:00  gpulimitd 4242 user mode, up 1h02m, quantum 20ms, 3 tenants\n"
            "sort: m memory  s share  w wait  u user  o OOM   q quit   sorted by memory\n"
            "USER  PIDS            MEM/CAP MEMORY       SHARE/TGT  WAIT OOM COMMAND\n"
            "GPU 0, held by 1000-4242-0123456789abcdef, 1 waiting\n"
            "bob   5000              8G/8G [##########]   70%/70%     -   - -\n"
            "alice 4242,4250,4251 3.2G/10G [###.......]   30%/30% 12.3s   3 python train.py +\n"
            "GPU 1 GPU-fa4ec0da-0000-4000-8000-000000000001, token free, 0 waiting\n"
            "alice 4242,4250,4251   512M/- [  no cap  ]    0%/30%    0s   - python train.py +\n"
            "no device yet\n"
            "bob   -                     -                    -/-     -   - sleep 1000\n");
}

TEST(TopFrame, NarrowerTerminalsLoseColumnsInOrder) {
  const TopFrameInput sut = input_of(kStatus);

  const TopFrame at60 = render_top_frame(sut, 60);
  const TopFrame at40 = render_top_frame(sut, 40);

  // Pids first, then the wait and the bar; memory, share and OOM stay.
  EXPECT_EQ(at60.lines[2], "USER   MEM/CAP MEMORY  SHARE/TGT  WAIT OOM COMMAND");
  EXPECT_EQ(at60.lines[5], "alice 3.2G/10G [##...]   30%/30% 12.3s   3 python train.py +");
  EXPECT_EQ(at60.lines[7], "alice   512M/- [none ]    0%/30%    0s   - python train.py +");
  EXPECT_EQ(at40.lines[2], "USER   MEM/CAP SHARE/TGT OOM COMMAND");
  EXPECT_EQ(at40.lines[5], "alice 3.2G/10G   30%/30%   3 python tra+");
}

TEST(TopFrame, NoLineIsEverWiderThanTheTerminal) {
  const TopFrameInput sut = input_of(kStatus);
  TopFrameInput no_server;
  no_server.problem = "no gpulimitd running (nobody listens at /run/user/1000/gpulimit/s.sock)";
  no_server.clock = "12:00:00";

  for (std::size_t width = 0; width <= 200; ++width) {
    for (const TopFrame& frame : {render_top_frame(sut, width), render_top_frame(no_server, width)})
      for (const std::string& line : frame.lines)
        ASSERT_LE(line.size(), width) << "width " << width << ": " << line;
  }
}

TEST(TopFrame, ControlCharactersInNamesNeverReachTheTerminal) {
  const TopFrameInput sut = input_of(R"({
    "server": {"pid": 1, "mode": "user", "socket": "/s", "quantum_us": 20000, "uptime_s": 1,
               "protocol": 1},
    "devices": [],
    "tenants": [{"tenant": "t", "number": 0, "uid": 0, "user": "r\u001b[2Joot", "pids": [1],
                 "command": "rm\t-rf\nx \u00e9t\u00e9", "sm_percent": null, "weight": 1,
                 "priority": "low", "devices": []}]})");

  const std::string text = joined(render_top_frame(sut, 120));

  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\t'), std::string::npos) << text;
  EXPECT_NE(text.find("r?[2Joot"), std::string::npos) << text;
  EXPECT_NE(text.find("rm?-rf?x ?t?"), std::string::npos) << text;
}

TEST(TopFrame, AnOrphanIsMarkedBeforeItsCommand) {
  const TopFrameInput sut = input_of(R"({
    "server": {"pid": 1, "mode": "user", "socket": "/s", "quantum_us": 20000, "uptime_s": 1,
               "protocol": 3},
    "devices": [],
    "tenants": [{"tenant": "left", "number": 0, "uid": 0, "user": "root", "pids": [21],
                 "command": "python worker.py", "sm_percent": null, "weight": 1,
                 "priority": "low", "devices": [], "leader": 20, "orphaned_s": 3.5,
                 "orphan_kill_in_s": null},
                {"tenant": "led", "number": 1, "uid": 0, "user": "root", "pids": [31],
                 "command": "python train.py", "sm_percent": null, "weight": 1,
                 "priority": "low", "devices": [], "leader": 30, "orphaned_s": null,
                 "orphan_kill_in_s": null}]})");

  const std::string text = joined(render_top_frame(sut, 120));

  EXPECT_NE(text.find("(orphan) python worker.py"), std::string::npos) << text;
  EXPECT_EQ(text.find("(orphan) python train.py"), std::string::npos) << text;
  EXPECT_NE(text.find("python train.py"), std::string::npos) << text;
}

TEST(TopFrame, NoServerSaysSoAndThatItRetries) {
  TopFrameInput sut;
  sut.problem = "no gpulimitd running (nobody listens at /tmp/s)";
  sut.clock = "09:30:00";
  sut.interval_s = 2.5;

  const TopFrame frame = render_top_frame(sut, 80);

  EXPECT_EQ(joined(frame),
            "top 09:30:00  no server\n"
            "sort: m memory  s share  w wait  u user  o OOM   q quit   sorted by memory\n"
            "\n"
            "no server: no gpulimitd running (nobody listens at /tmp/s); retrying every 2.5s\n");
  EXPECT_FALSE(frame.has_heading);
}

TEST(TopFrame, AServerWithoutTenants) {
  const TopFrameInput sut = input_of(R"({
    "server": {"pid": 7, "mode": "system", "socket": "/s", "quantum_us": 2500, "uptime_s": 59.9,
               "protocol": 1},
    "devices": [{"board_index": 0, "uuid": "GPU-a", "holder": null, "waiting": 0}],
    "tenants": []})");

  const TopFrame frame = render_top_frame(sut, 80);

  EXPECT_EQ(joined(frame),
            "top 12:00:00  gpulimitd 7 system mode, up 59.9s, quantum 2.5ms, 0 tenants\n"
            "sort: m memory  s share  w wait  u user  o OOM   q quit   sorted by memory\n"
            "USER TENANT PIDS MEM/CAP MEMORY       SHARE/TGT WAIT OOM COMMAND\n"
            "GPU 0 GPU-a, token free, 0 waiting\n"
            "no tenants\n");
}

TEST(TopSort, EachKeySortsBiggestFirstAndUnknownLast) {
  const std::vector<TopRow> rows = {
      row("a", "zoe", 100, 0.5, std::nullopt, 0),
      row("b", "adam", std::nullopt, 0.1, 300, 7),
      row("c", "mia", 300, std::nullopt, 100, std::nullopt),
      row("d", "adam", 200, 0.9, 200, 1),
  };
  const auto sorted = [&rows](TopSortKey key) {
    std::vector<TopRow> sut = rows;
    sort_rows(sut, key);
    return tenants_of(sut);
  };

  EXPECT_EQ(sorted(TopSortKey::kMemory), (std::vector<std::string>{"c", "d", "a", "b"}));
  EXPECT_EQ(sorted(TopSortKey::kShare), (std::vector<std::string>{"d", "a", "b", "c"}));
  EXPECT_EQ(sorted(TopSortKey::kWait), (std::vector<std::string>{"b", "d", "c", "a"}));
  EXPECT_EQ(sorted(TopSortKey::kOom), (std::vector<std::string>{"b", "d", "a", "c"}));
  // Users alphabetically; the same user by tenant id.
  EXPECT_EQ(sorted(TopSortKey::kUser), (std::vector<std::string>{"b", "d", "c", "a"}));
}

TEST(TopSort, TiesGoByTenantIdWhateverTheOrderBefore) {
  std::vector<TopRow> sut = {row("z", "u", 5, 0, 0, 0), row("m", "u", 5, 0, 0, 0),
                             row("a", "u", 5, 0, 0, 0)};

  sort_rows(sut, TopSortKey::kMemory);

  EXPECT_EQ(tenants_of(sut), (std::vector<std::string>{"a", "m", "z"}));
}

TEST(TopSort, KeysAndTheirNames) {
  EXPECT_EQ(sort_key_for('m'), TopSortKey::kMemory);
  EXPECT_EQ(sort_key_for('S'), TopSortKey::kShare);
  EXPECT_EQ(sort_key_for('w'), TopSortKey::kWait);
  EXPECT_EQ(sort_key_for('u'), TopSortKey::kUser);
  EXPECT_EQ(sort_key_for('o'), TopSortKey::kOom);
  EXPECT_EQ(sort_key_for('q'), std::nullopt);
  EXPECT_EQ(sort_key_for('\x1b'), std::nullopt);
  EXPECT_EQ(sort_key_name(TopSortKey::kWait), "wait");
}

TEST(TopSort, TheFrameShowsTheChosenOrder) {
  const TopFrame by_user = render_top_frame(input_of(kStatus, TopSortKey::kUser), 80);

  EXPECT_TRUE(by_user.lines[1].ends_with("sorted by user")) << by_user.lines[1];
  EXPECT_TRUE(by_user.lines[4].starts_with("alice ")) << by_user.lines[4];
  EXPECT_TRUE(by_user.lines[5].starts_with("bob ")) << by_user.lines[5];
}

TEST(MemoryBar, EmptyFullOverTheCapAndUnknown) {
  const uint64_t gib = uint64_t{1} << 30;

  EXPECT_EQ(memory_bar(0, 8 * gib, 12), "[..........]");
  EXPECT_EQ(memory_bar(8 * gib, 8 * gib, 12), "[##########]");
  EXPECT_EQ(memory_bar(4 * gib, 8 * gib, 12), "[#####.....]");
  EXPECT_EQ(memory_bar(9 * gib, 8 * gib, 12), "[!!!!!!!!!!]");
  EXPECT_EQ(memory_bar(gib, std::nullopt, 12), "[  no cap  ]");
  EXPECT_EQ(memory_bar(gib, std::nullopt, 7), "[none ]");
  EXPECT_EQ(memory_bar(gib, std::nullopt, 5), "[ - ]");
  EXPECT_EQ(memory_bar(std::nullopt, 8 * gib, 7), "[  ?  ]");
}

TEST(MemoryBar, SomeUseShowsAndFullMeansReached) {
  EXPECT_EQ(memory_bar(1, 1'000'000, 12), "[#.........]");
  EXPECT_EQ(memory_bar(999'999, 1'000'000, 12), "[#########.]");
  EXPECT_EQ(memory_bar(0, 0, 12), "[##########]");  // a cap of nothing is reached
  EXPECT_EQ(memory_bar(1, 2, 2), "  ");             // no room for a bar
}

TEST(TopCells, MemoryPidsWaitAndShare) {
  EXPECT_EQ(compact_bytes(0), "0B");
  EXPECT_EQ(compact_bytes(1023), "1023B");
  EXPECT_EQ(compact_bytes(uint64_t{512} << 20), "512M");
  EXPECT_EQ(compact_bytes(3435973837), "3.2G");
  EXPECT_EQ(compact_bytes((uint64_t{1} << 30) - 1), "1G");
  EXPECT_EQ(memory_text(std::nullopt, uint64_t{8} << 30), "-/8G");
  EXPECT_EQ(memory_text(1536, std::nullopt), "1.5K/-");

  EXPECT_EQ(format_pids({}, 10), "-");
  EXPECT_EQ(format_pids({4242, 4250}, 10), "4242,4250");
  EXPECT_EQ(format_pids({4242, 4250, 4251}, 10), "4242,+2");
  EXPECT_EQ(format_pids({4242, 4250, 4251}, 12), "4242,4250,+1");
  EXPECT_EQ(format_pids({4242, 4250}, 3), "+2");

  EXPECT_EQ(format_wait(std::nullopt), "-");
  EXPECT_EQ(format_wait(0), "0s");
  EXPECT_EQ(format_wait(850'000'000), "850ms");
  EXPECT_EQ(format_wait(12'399'000'000), "12.3s");
  EXPECT_EQ(format_wait(303'000'000'000), "5m03s");
  EXPECT_EQ(format_wait(uint64_t{7500} * 1'000'000'000), "2h05m");
  EXPECT_EQ(format_wait(uint64_t{3 * 86400 + 4 * 3600} * 1'000'000'000), "3d04h");

  EXPECT_EQ(share_text(0.704, 0.7), "70%/70%");
  EXPECT_EQ(share_text(1.0, std::nullopt), "100%/-");
}

TEST(TopCells, FitMarksWhatItCuts) {
  EXPECT_EQ(fit("alice", 5), "alice");
  EXPECT_EQ(fit("alexandra", 5), "alex+");
  EXPECT_EQ(fit("alexandra", 1), "+");
  EXPECT_EQ(fit("alexandra", 0), "");
  EXPECT_EQ(printable("caf\xc3\xa9\x01."), "caf??.");
}

}  // namespace
}  // namespace gpulimit::cli
