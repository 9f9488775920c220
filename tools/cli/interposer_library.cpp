#include "interposer_library.h"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>

#include "build_config.h"

namespace gpulimit::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOverrideVariable = "GPULIMIT_LIBRARY";
constexpr const char* kLibraryName = "libgpulimit.so";

// `path` made absolute and free of symlinks and `..`, or why it cannot be
// the library. Absolute, because the job may change directory before it
// starts a process that loads it.
std::optional<std::string> resolve_library(const fs::path& path, std::string& reason) {
  std::error_code failure;
  const fs::path resolved = fs::canonical(path, failure);
  if (failure) {
    reason = failure.message();
    return std::nullopt;
  }
  if (!fs::is_regular_file(resolved, failure)) {
    reason = "not a regular file";
    return std::nullopt;
  }
  return resolved.string();
}

}  // namespace

bool find_interposer_library(std::string& path, std::string& error) {
  std::string reason;
  if (const char* given = std::getenv(kOverrideVariable); given && *given) {
    if (const std::optional<std::string> library = resolve_library(given, reason)) {
      path = *library;
      return true;
    }
    error = std::string(kOverrideVariable) + "=" + given + ": " + reason;
    return false;
  }

  std::error_code failure;
  const fs::path executable = fs::read_symlink("/proc/self/exe", failure);
  if (failure) {
    error = "cannot find libgpulimit.so: /proc/self/exe: " + failure.message() + "; set " +
            kOverrideVariable + " to its path";
    return false;
  }
  const fs::path directory = executable.parent_path();
  const fs::path installed = directory / ".." / "lib" / kLibraryName;
  if (const std::optional<std::string> library = resolve_library(installed, reason)) {
    path = *library;
    return true;
  }
  std::string looked_for = installed.lexically_normal().string();

  // Only the gpulimit a build tree made takes the library of that tree: an
  // installed gpulimit must never pick up a stale build.
  if (fs::equivalent(directory, GPULIMIT_BUILD_TREE_CLI_DIR, failure)) {
    if (const std::optional<std::string> library =
            resolve_library(GPULIMIT_BUILD_TREE_LIBRARY, reason)) {
      path = *library;
      return true;
    }
    looked_for += std::string(" and ") + GPULIMIT_BUILD_TREE_LIBRARY;
  }
  error = "cannot find libgpulimit.so (looked for " + looked_for + "); set " + kOverrideVariable +
          " to its path";
  return false;
}

}  // namespace gpulimit::cli
