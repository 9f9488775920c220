#include "gpulimit/protocol/job_leader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>

namespace gpulimit::protocol {
namespace {

template <typename Number>
bool parse_number(std::string_view text, Number& out) {
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

bool format_job_leader(const JobLeader& leader, char* out, std::size_t size) noexcept {
  const int written = std::snprintf(out, size, "%d:%llu", static_cast<int>(leader.pid),
                                    static_cast<unsigned long long>(leader.start_ticks));
  return written > 0 && static_cast<std::size_t>(written) < size;
}

bool parse_job_leader(std::string_view text, JobLeader& out) noexcept {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  JobLeader leader;
  if (!parse_number(text.substr(0, colon), leader.pid) ||
      !parse_number(text.substr(colon + 1), leader.start_ticks))
    return false;
  if (leader.pid <= 0 || leader.start_ticks == 0) return false;
  out = leader;
  return true;
}

JobLeader job_leader_in(char* const* envp) noexcept {
  const std::string_view name = kJobLeaderVariable;
  for (char* const* entry = envp; entry && *entry; ++entry) {
    const std::string_view assignment(*entry);
    if (!assignment.starts_with(name) || assignment.size() <= name.size() ||
        assignment[name.size()] != '=')
      continue;
    JobLeader leader;
    // The first counts, as with getenv.
    return parse_job_leader(assignment.substr(name.size() + 1), leader) ? leader : JobLeader{};
  }
  return {};
}

bool read_job_leader(int32_t pid, JobLeader& out) noexcept {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  // Enough for any stat line: 52 numbers and a command of at most 64 bytes.
  char text[1024];
  std::size_t length = 0;
  while (length < sizeof text) {
    const ssize_t got = ::read(fd, text + length, sizeof text - length);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    length += static_cast<std::size_t>(got);
  }
  ::close(fd);
  const uint64_t start = stat_start_ticks(std::string_view(text, length));
  if (start == 0) return false;
  out = JobLeader{pid, start};
  return true;
}

uint64_t stat_start_ticks(std::string_view stat) noexcept {
  const std::size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return 0;
  std::string_view rest = stat.substr(close + 1);
  // Fields 3 to 22, each after a space.
  std::string_view field;
  for (int index = 3; index <= 22; ++index) {
    const std::size_t begin = rest.find_first_not_of(' ');
    if (begin == std::string_view::npos) return 0;
    rest = rest.substr(begin);
    const std::size_t end = std::min(rest.find_first_of(" \n"), rest.size());
    field = rest.substr(0, end);
    rest = rest.substr(end);
  }
  uint64_t ticks = 0;
  return parse_number(field, ticks) ? ticks : 0;
}

}  // namespace gpulimit::protocol
