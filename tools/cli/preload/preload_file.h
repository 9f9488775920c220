// /etc/ld.so.preload read and replaced whole: a reader (the loader of every
// program that starts) sees the old file or the new one, never a part.
#pragma once

#include <string>

namespace gpulimit::cli {

inline constexpr const char* kPreloadFilePath = "/etc/ld.so.preload";

// The file `gpulimit preload` edits: $GPULIMIT_PRELOAD_FILE when set (for
// testing: no test may edit the machine's own), else /etc/ld.so.preload.
std::string preload_file_path();

struct PreloadFile {
  bool exists = false;
  std::string text;
};

// Reads `path`. A missing file is an empty one that does not exist; a
// symlink or anything but a regular file is refused, since replacing it
// would replace the link, not what it points to.
bool read_preload_file(const std::string& path, PreloadFile& file, std::string& error);

// Makes `path` hold `text`: written to a new file in the same directory,
// given the mode and owner of the file it replaces (0644 and the caller's
// for a new one), flushed to disk, then renamed over `path`, and the
// directory flushed. On failure `path` is as it was and the new file gone.
bool replace_preload_file(const std::string& path, const std::string& text, std::string& error);

// Removes `path` (and flushes its directory).
bool remove_preload_file(const std::string& path, std::string& error);

// Holds an exclusive lock on `path`'s directory (flock) while it lives, so
// that two gpulimit preload commands never read, edit and replace the file
// at once, the second losing the first's change. No file is created for it.
class PreloadFileLock {
 public:
  PreloadFileLock() = default;
  PreloadFileLock(const PreloadFileLock&) = delete;
  PreloadFileLock& operator=(const PreloadFileLock&) = delete;
  ~PreloadFileLock();
  bool acquire(const std::string& path, std::string& error);

 private:
  int fd_ = -1;
};

}  // namespace gpulimit::cli
