// A fresh directory per test, removed with its files at the end, so that
// tests running in parallel never share a ledger, a socket or a simulated
// machine.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace gpulimit::testing {

class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/gpulimit-test-XXXXXX";
    if (mkdtemp(pattern.data()))
      path_ = pattern;
    else
      ADD_FAILURE() << "mkdtemp(" << pattern << "): " << std::strerror(errno);
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  ~TemporaryDirectory() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace gpulimit::testing
