// gpulimit --help: a manual page, its options and variables taken from the
// option table so that the page cannot drift from what is parsed.
#pragma once

#include <string>

namespace gpulimit::cli {

std::string help_text();

}  // namespace gpulimit::cli
