#include "preload/preload_entries.h"

#include <algorithm>

namespace gpulimit::cli {
namespace {

constexpr std::string_view kSeparators = " \t\n:";
constexpr std::string_view kBlanks = " \t";
constexpr std::string_view kLibraryName = "libgpulimit.so";

struct Span {
  std::size_t begin = 0;
  std::size_t end = 0;
};

// Where each entry of `text` lies.
std::vector<Span> entry_spans(std::string_view text) {
  std::vector<Span> spans;
  std::size_t at = 0;
  while (at < text.size()) {
    if (text[at] == '#') {
      at = text.find('\n', at);
      if (at == std::string_view::npos) break;
      continue;
    }
    if (kSeparators.find(text[at]) != std::string_view::npos) {
      ++at;
      continue;
    }
    const std::size_t end = std::min(text.find_first_of(" \t\n:#", at), text.size());
    spans.push_back({at, end});
    at = end;
  }
  return spans;
}

bool blank(std::string_view text) {
  return text.find_first_not_of(kBlanks) == std::string_view::npos;
}

}  // namespace

std::vector<std::string> preload_entries(std::string_view text) {
  std::vector<std::string> entries;
  for (const Span& span : entry_spans(text))
    entries.emplace_back(text.substr(span.begin, span.end - span.begin));
  return entries;
}

bool is_preload_entry(std::string_view entry) {
  return entry.size() > 1 && entry.front() == '/' &&
         entry.find_first_of(" \t\n:#\r\v\f") == std::string_view::npos &&
         entry.find('\0') == std::string_view::npos;
}

bool names_interposer(std::string_view entry) {
  const std::size_t slash = entry.rfind('/');
  return (slash == std::string_view::npos ? entry : entry.substr(slash + 1)) == kLibraryName;
}

std::string with_first_entry(std::string_view text, std::string_view entry) {
  std::string result(entry);
  result += '\n';
  result += text;
  return result;
}

std::string without_entries(std::string_view text, const PreloadEntryTest& remove) {
  std::string result;
  std::size_t copied = 0;  // text before this is in `result` or dropped
  std::vector<Span> removed;
  for (const Span& span : entry_spans(text))
    if (remove(text.substr(span.begin, span.end - span.begin))) removed.push_back(span);
  if (removed.empty()) return std::string(text);

  // Line by line: a line is kept less its removed entries, each with the
  // separator after it (or, for the last of the line, the one before it).
  std::size_t next = 0;
  while (copied < text.size()) {
    const std::size_t newline = text.find('\n', copied);
    const std::size_t line_end = newline == std::string_view::npos ? text.size() : newline;
    std::string line;
    std::size_t at = copied;
    bool changed = false;
    for (; next < removed.size() && removed[next].begin < line_end; ++next) {
      Span cut = removed[next];
      if (cut.end < line_end && kSeparators.find(text[cut.end]) != std::string_view::npos) {
        ++cut.end;
      } else if (cut.begin > at &&
                 kSeparators.find(text[cut.begin - 1]) != std::string_view::npos) {
        --cut.begin;
      }
      line += text.substr(at, cut.begin - at);
      at = cut.end;
      changed = true;
    }
    line += text.substr(at, line_end - at);
    const bool drop_line = changed && blank(line);
    if (!drop_line) {
      result += line;
      if (newline != std::string_view::npos) result += '\n';
    }
    copied = newline == std::string_view::npos ? text.size() : newline + 1;
  }
  return result;
}

}  // namespace gpulimit::cli
