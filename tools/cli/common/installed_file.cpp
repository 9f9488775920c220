#include "common/installed_file.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>

#include "build_config.h"

namespace gpulimit::cli {
namespace {

namespace fs = std::filesystem;

// `path` made absolute and canonical, or why it cannot be `file`.
std::optional<std::string> resolve(const InstalledFile& file, const fs::path& path,
                                   std::string& reason) {
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
  if (file.program && access(resolved.c_str(), X_OK) != 0) {
    reason = "not executable";
    return std::nullopt;
  }
  return resolved.string();
}

// A bare program name as execvp finds it: the first executable file of that
// name in PATH.
std::optional<std::string> search_path(const InstalledFile& file, std::string_view name,
                                       std::string& reason) {
  const char* path = std::getenv("PATH");
  std::string_view directories = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  reason = "not found in PATH";
  for (;;) {
    const std::size_t colon = directories.find(':');
    std::string_view directory = directories.substr(0, colon);
    if (directory.empty()) directory = ".";
    std::string ignored;
    if (std::optional<std::string> found = resolve(file, fs::path(directory) / name, ignored))
      return found;
    if (colon == std::string_view::npos) return std::nullopt;
    directories.remove_prefix(colon + 1);
  }
}

std::string how_to_override(const InstalledFile& file) {
  return "; set " + std::string(file.override_variable) + " to its path";
}

}  // namespace

bool find_installed_file(const InstalledFile& file, std::string& path, std::string& error) {
  std::string reason;
  const std::string variable(file.override_variable);
  if (const char* given = std::getenv(variable.c_str()); given && *given) {
    const std::string_view text(given);
    const std::optional<std::string> found = file.program && text.find('/') == text.npos
                                                 ? search_path(file, text, reason)
                                                 : resolve(file, given, reason);
    if (found) {
      path = *found;
      return true;
    }
    error = variable + "=" + given + ": " + reason;
    return false;
  }

  std::error_code failure;
  const fs::path executable = fs::read_symlink("/proc/self/exe", failure);
  if (failure) {
    error = "cannot find " + std::string(file.name) + ": /proc/self/exe: " + failure.message() +
            how_to_override(file);
    return false;
  }
  const fs::path directory = executable.parent_path();
  const fs::path installed = directory / file.installed;
  if (const std::optional<std::string> found = resolve(file, installed, reason)) {
    path = *found;
    return true;
  }
  std::string looked_for = installed.lexically_normal().string();

  if (fs::equivalent(directory, GPULIMIT_BUILD_TREE_CLI_DIR, failure)) {
    if (const std::optional<std::string> found = resolve(file, file.build_tree, reason)) {
      path = *found;
      return true;
    }
    looked_for += " and " + std::string(file.build_tree);
  }
  error = "cannot find " + std::string(file.name) + " (looked for " + looked_for + ")" +
          how_to_override(file);
  return false;
}

}  // namespace gpulimit::cli
