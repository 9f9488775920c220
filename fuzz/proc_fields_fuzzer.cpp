// The fields gpulimitd's watcher reads from /proc (stat_start_ticks,
// status_real_id), which decide whether a process is the one it saw and
// whose it is before it is killed. The input is read as a whole file, and
// its first 15 bytes as the command a process may give itself
// (prctl(PR_SET_NAME): anything but NUL), put into /proc files as the
// kernel writes them. Asserts that whatever the command, the start and
// the ids read are the ones the kernel wrote.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "gpulimit/server/watcher/proc_fields.h"

namespace {

using namespace gpulimit::server;

constexpr std::size_t kCommandLength = 15;  // TASK_COMM_LEN - 1

// The kernel writes the command into /proc/PID/status escaped (seq_escape
// of whitespace and '\\'), so that it stays on the Name line.
std::string escaped(std::string_view command) {
  std::string text;
  for (const char c : command) {
    switch (c) {
      case '\n':
        text += "\\n";
        break;
      case '\t':
        text += "\\t";
        break;
      case '\\':
        text += "\\\\";
        break;
      default:
        text += c;
    }
  }
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)stat_start_ticks(text);
  (void)status_real_id(text, "Uid:");
  (void)status_real_id(text, "Gid:");

  std::string command(text.substr(0, kCommandLength));
  std::erase(command, '\0');
  uint64_t start = 1;
  for (const char c : text.substr(std::min(size, kCommandLength)))
    start = start * 31 + static_cast<unsigned char>(c);
  start = start % 1'000'000'000'000 + 1;

  const std::string stat = "4242 (" + command +
                           ") S 1 4242 4242 0 -1 4194560 120 0 0 0 3 1 0 0 20 0 1 0 " +
                           std::to_string(start) + " 10485760 512 18446744073709551615 1 1 0\n";
  FUZZ_CHECK(stat_start_ticks(stat) == start);

  const std::string status = "Name:\t" + escaped(command) +
                             "\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n"
                             "Uid:\t1000\t0\t0\t0\nGid:\t2000\t0\t0\t0\nGroups:\t27 2000\n";
  FUZZ_CHECK(status_real_id(status, "Uid:") == 1000u);
  FUZZ_CHECK(status_real_id(status, "Gid:") == 2000u);
  return 0;
}
