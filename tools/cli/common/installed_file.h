// Files gpulimit runs with, found the one way for each: an override
// variable, else beside gpulimit as installed, else, for a gpulimit run from
// its build tree, the file that build tree made.
#pragma once

#include <string>
#include <string_view>

namespace gpulimit::cli {

struct InstalledFile {
  std::string_view name;               // in errors: "libgpulimit.so"
  std::string_view override_variable;  // "GPULIMIT_LIBRARY"
  std::string_view installed;          // relative to gpulimit's directory
  std::string_view build_tree;         // absolute, where this build puts it
  // A program: it must be executable, and an override without a '/' is
  // looked up in PATH, as a shell looks up a command.
  bool program = false;
};

// The absolute path of `file`, free of symlinks and `..` (the job may change
// directory), the first that exists of:
//  - $<override_variable>, when set (then it must exist);
//  - <directory of gpulimit>/<installed>;
//  - <build_tree>, when gpulimit is the one its build tree made: an
//    installed gpulimit never picks up a stale build.
// False with `error` set to one line when there is none.
bool find_installed_file(const InstalledFile& file, std::string& path, std::string& error);

}  // namespace gpulimit::cli
