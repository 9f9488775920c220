// Reading what a workload wrote: its output file, and one value of its
// key=value report line.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace server_test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The value of `key` in a workload's key=value line, or "".
inline std::string value_of(const std::string& output, const std::string& key) {
  const std::string needle = " " + key + "=";
  const std::size_t at = output.find(needle);
  if (at == std::string::npos) return "";
  const std::size_t start = at + needle.size();
  return output.substr(start, output.find_first_of(" \n", start) - start);
}

}  // namespace server_test
