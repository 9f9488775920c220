#include "preload/preload_command.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "common/file_identity.h"
#include "common/interposer_library.h"
#include "preload/preload_entries.h"
#include "preload/preload_file.h"
#include "preload/preload_library_check.h"

namespace gpulimit::cli {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr const char* kUsage = "usage: gpulimit preload enable|disable|status";

int failed(const std::string& message) {
  std::fprintf(stderr, "gpulimit: preload: %s\n", message.c_str());
  return kExitFailed;
}

int done(const std::string& message) {
  std::printf("gpulimit: %s\n", message.c_str());
  return 0;
}

// An entry that is `library` itself (by path or by file) or any other copy
// of the interposer.
PreloadEntryTest interposer_entries(const std::string& library) {
  return [library](std::string_view entry) {
    return names_interposer(entry) ||
           (!library.empty() && (entry == library || same_file(library, std::string(entry))));
  };
}

int enable(const std::string& path) {
  if (::geteuid() != 0) return failed("enable: only root may change " + path);
  std::string library;
  std::string error;
  if (!find_interposer_library(library, error)) return failed("enable: " + error);
  if (!is_preload_entry(library))
    return failed("enable: " + library + ": a path with blanks, ':' or '#' cannot be preloaded");
  PreloadFileLock lock;
  if (!lock.acquire(path, error)) return failed("enable: " + error);
  PreloadFile file;
  if (!read_preload_file(path, file, error)) return failed("enable: " + error);

  const PreloadEntryTest ours = interposer_entries(library);
  for (const std::string& entry : preload_entries(file.text)) {
    if (entry == library) return done(path + " preloads " + library + " already");
    if (ours(entry)) {
      return failed("enable: " + path + " preloads another copy of the interposer, " + entry +
                    "; run gpulimit preload disable first");
    }
  }
  if (!check_preload_library(library, error)) return failed("enable: " + error);
  if (!replace_preload_file(path, with_first_entry(file.text, library), error))
    return failed("enable: " + error);
  return done("every program started from now on preloads " + library + " (" + path + ")");
}

int disable(const std::string& path) {
  if (::geteuid() != 0) return failed("disable: only root may change " + path);
  // The library may be gone (that is one reason to disable): without it,
  // every copy of the interposer is still recognised by its name.
  std::string library;
  std::string error;
  if (!find_interposer_library(library, error)) library.clear();
  PreloadFileLock lock;
  if (!lock.acquire(path, error)) return failed("disable: " + error);
  PreloadFile file;
  if (!read_preload_file(path, file, error)) return failed("disable: " + error);
  const std::string text = without_entries(file.text, interposer_entries(library));
  if (!file.exists || text == file.text) return done(path + " preloads no libgpulimit.so already");

  // An empty file is one that enable created: it goes as it came.
  const bool removed =
      text.empty() ? remove_preload_file(path, error) : replace_preload_file(path, text, error);
  if (!removed) return failed("disable: " + error);
  return done("programs started from now on preload no libgpulimit.so (" + path + ")");
}

int status(const std::string& path) {
  std::string library;
  std::string error;
  if (!find_interposer_library(library, error)) library.clear();
  PreloadFile file;
  if (!read_preload_file(path, file, error)) return failed("status: " + error);
  const PreloadEntryTest ours = interposer_entries(library);
  std::string listed;
  for (const std::string& entry : preload_entries(file.text)) {
    if (!ours(entry)) continue;
    listed += (listed.empty() ? "" : ", ") + entry;
    if (::access(entry.c_str(), R_OK) != 0) listed += " (missing)";
  }
  if (listed.empty()) return done("preload is disabled: " + path + " preloads no libgpulimit.so");
  return done("preload is enabled: " + path + " preloads " + listed);
}

}  // namespace

int run_preload_command(const std::vector<std::string_view>& args) {
  if (args.size() != 1) {
    std::fprintf(stderr, "gpulimit: preload: %s\n", kUsage);
    return kExitUsage;
  }
  if (args[0] == "-h" || args[0] == "--help") {
    std::printf("%s (gpulimit --help says more)\n", kUsage);
    return 0;
  }
  const std::string path = preload_file_path();
  if (args[0] == "enable") return enable(path);
  if (args[0] == "disable") return disable(path);
  if (args[0] == "status") return status(path);
  std::fprintf(stderr, "gpulimit: preload: unknown action %s (%s)\n", std::string(args[0]).c_str(),
               kUsage);
  return kExitUsage;
}

}  // namespace gpulimit::cli
