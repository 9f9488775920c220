// The status JSON gpulimitd sends in a StatusReply, as `gpulimit status` and
// `gpulimit top` read it: parse_status_report on any text. Asserts that a
// refusal is one line, that a report read is written back (to_json, as the
// server writes it) to JSON that reads as the same report, and that writing
// is then stable.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "gpulimit/protocol/status_json.h"

namespace status = gpulimit::protocol::status;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  status::Report report;
  std::string error;
  if (!status::parse_status_report(text, report, error)) {
    FUZZ_CHECK(!error.empty());
    FUZZ_CHECK(error.find('\n') == std::string::npos);
    FUZZ_CHECK(report == status::Report{});  // untouched
    return 0;
  }
  const std::string written = status::Json(report).dump();
  status::Report again;
  FUZZ_CHECK(status::parse_status_report(written, again, error));
  FUZZ_CHECK(again == report);
  FUZZ_CHECK(status::Json(again).dump() == written);
  return 0;
}
