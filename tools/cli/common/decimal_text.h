// Numbers as `gpulimit status` and `gpulimit top` show them.
#pragma once

#include <string>

namespace gpulimit::cli {

// One decimal, without a trailing ".0": 1.5 is "1.5", 2.0 is "2".
std::string one_decimal(double value);

}  // namespace gpulimit::cli
