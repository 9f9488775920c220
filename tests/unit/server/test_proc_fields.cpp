// The fields the watcher reads from /proc/PID/stat and /proc/PID/status,
// whatever command the process gave itself.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include "gpulimit/server/watcher/proc_fields.h"

namespace gpulimit::server {
namespace {

// A /proc/PID/stat line of a process called `command` that started at `start`.
std::string stat_line(const std::string& command, uint64_t start) {
  return "4242 (" + command + ") S 1 4242 4242 0 -1 4194560 120 0 0 0 3 1 0 0 20 0 1 0 " +
         std::to_string(start) + " 10485760 512 18446744073709551615 1 1 0 0 0 0 0 0 0\n";
}

std::string read_file(const char* path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(ProcFields, ReadsTheStartWhateverTheCommandHolds) {
  EXPECT_EQ(stat_start_ticks(stat_line("python3", 987654)), 987654u);
  EXPECT_EQ(stat_start_ticks(stat_line("a) S 1 2 3", 77)), 77u);
  EXPECT_EQ(stat_start_ticks(stat_line(") ) )", 78)), 78u);
  EXPECT_EQ(stat_start_ticks(stat_line("x\ny (z", 79)), 79u);
}

TEST(ProcFields, AStatWithoutTheFieldHasNoStart) {
  EXPECT_EQ(stat_start_ticks(""), 0u);
  EXPECT_EQ(stat_start_ticks("4242 (python3 S 1 2"), 0u);
  EXPECT_EQ(stat_start_ticks("4242 (python3) S 1 2 3"), 0u);
}

TEST(ProcFields, ReadsTheRealIdsOfStatus) {
  const std::string status =
      "Name:\tUid:\\t5\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t1001\t1002\t1003\n"
      "Gid:\t2000\t2000\t2000\t2000\n";

  EXPECT_EQ(status_real_id(status, "Uid:"), 1000u);
  EXPECT_EQ(status_real_id(status, "Gid:"), 2000u);
  EXPECT_EQ(status_real_id("Name:\tx\n", "Uid:"), std::nullopt);
}

TEST(ProcFields, ReadsThisProcess) {
  const std::string status = read_file("/proc/self/status");
  EXPECT_EQ(status_real_id(status, "Uid:"), ::getuid());
  EXPECT_EQ(status_real_id(status, "Gid:"), ::getgid());
  EXPECT_GT(stat_start_ticks(read_file("/proc/self/stat")), 0u);
}

}  // namespace
}  // namespace gpulimit::server
