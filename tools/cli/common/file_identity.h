// Whether two paths name one file: the same device and inode, whatever the
// spelling (symlinks, `..`, a hard link).
#pragma once

#include <sys/stat.h>

#include <string>

namespace gpulimit::cli {

// False when either path cannot be stat'ed.
inline bool same_file(const std::string& a, const std::string& b) {
  struct stat first {};
  struct stat second {};
  return ::stat(a.c_str(), &first) == 0 && ::stat(b.c_str(), &second) == 0 &&
         first.st_dev == second.st_dev && first.st_ino == second.st_ino;
}

}  // namespace gpulimit::cli
