// The text of /etc/ld.so.preload, read and edited as the loader reads it:
// entries separated by spaces, tabs, newlines or ':', and '#' starting a
// comment that runs to the end of its line (glibc, elf/rtld.c). Edits touch
// only the entries they are about: every other byte stays as it was.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gpulimit::cli {

using PreloadEntryTest = std::function<bool(std::string_view entry)>;

// The entries of `text` in their order, comments left out.
std::vector<std::string> preload_entries(std::string_view text);

// Whether `entry` can stand in ld.so.preload as one entry naming an
// absolute path: not empty, starting with '/', and free of the loader's
// separators and of '#'.
bool is_preload_entry(std::string_view entry);

// Whether `entry`'s file name is libgpulimit.so: a copy of the interposer,
// wherever it lies.
bool names_interposer(std::string_view entry);

// `text` with `entry` on a line of its own before everything else, so that
// it is preloaded first. `entry` must satisfy is_preload_entry.
std::string with_first_entry(std::string_view text, std::string_view entry);

// `text` less every entry `remove` picks. A line left with nothing but
// blanks goes with it; the rest of a line that keeps other entries or a
// comment stays.
std::string without_entries(std::string_view text, const PreloadEntryTest& remove);

}  // namespace gpulimit::cli
