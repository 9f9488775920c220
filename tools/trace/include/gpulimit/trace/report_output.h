// Renderings of a Report: a table for people and JSON for programs. They are
// exactly what gpulimit-trace prints, and a test can stream a Report into a
// failure message to show what the trace looked like.
#pragma once

#include <iosfwd>
#include <span>

#include "gpulimit/trace/analysis.h"

namespace gpulimit::trace {

void write_table(std::ostream& out, const Report& report);

// One document for all reports: {"devices": [...]}, ending with a newline.
void write_json(std::ostream& out, std::span<const Report> reports);

// The table.
std::ostream& operator<<(std::ostream& out, const Report& report);

}  // namespace gpulimit::trace
