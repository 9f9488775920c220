#include "common/decimal_text.h"

#include <cstdio>

namespace gpulimit::cli {

std::string one_decimal(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f", value);
  std::string result(text);
  if (result.ends_with(".0")) result.resize(result.size() - 2);
  return result;
}

}  // namespace gpulimit::cli
