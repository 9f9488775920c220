#include "report_line.h"

#include <cassert>
#include <cctype>
#include <cstdio>

namespace workloads {

ReportLine& ReportLine::add(std::string_view key, std::string_view value) {
  assert(!key.empty());
  if (!text_.empty()) text_ += ' ';
  text_ += key;
  text_ += '=';
  for (char c : value) {
    text_ += (std::isspace(static_cast<unsigned char>(c)) || c == '=') ? '_' : c;
  }
  return *this;
}

ReportLine& ReportLine::add(std::string_view key, std::span<const uint64_t> values) {
  std::string list;
  for (uint64_t value : values) {
    if (!list.empty()) list += ',';
    list += std::to_string(value);
  }
  return add(key, std::string_view(list));
}

void ReportLine::print() const {
  std::fprintf(stdout, "%s\n", text_.c_str());
  std::fflush(stdout);
}

}  // namespace workloads
