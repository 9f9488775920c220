// What a library must be before every program on the machine preloads it:
// a mistake in /etc/ld.so.preload reaches every process, root's and the
// login shell's included, so nothing is taken on trust.
#pragma once

#include <string>

namespace gpulimit::cli {

// True when `library` (an absolute path) is fit to be preloaded everywhere:
//  - a regular file (symlinks followed), owned by root and not writable by
//    others, in directories owned by root that others cannot write to
//    (unless sticky), so no user can swap it;
//  - an ELF shared object of this machine's class, byte order and
//    architecture, those of the running gpulimit;
//  - a program started with it preloaded (/bin/true, with LD_PRELOAD set to
//    it) exits 0 within seconds and prints nothing: the loader warns on
//    stderr of a library it cannot load, and runs the program anyway.
// False with `error` set to one line saying what is wrong.
bool check_preload_library(const std::string& library, std::string& error);

}  // namespace gpulimit::cli
