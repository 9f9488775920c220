// Kernel traces (format: tools/trace/include/gpulimit/trace/trace.h), as the
// simulator and the CUPTI tracer write them and the tests and gpulimit-trace
// read them: trace::parse on any text, then trace::analyze of every device.
// Asserts that a refusal names a line, that every kernel read keeps the
// format's rules and the order parse promises, that the kernels written
// back as lines read as the same kernels, and that shares and busy
// fractions stay within [0, 1].
#include <cstddef>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>

#include "fuzz_check.h"
#include "gpulimit/trace/trace.h"

namespace {

using namespace gpulimit::trace;

Trace parsed(const std::string& text, bool& ok, std::string& error) {
  std::istringstream in(text);
  ParseResult result = parse(in, "fuzz.trace");
  ok = result.ok();
  if (!ok) {
    error = result.error().message();
    return {};
  }
  return *std::move(result);
}

void check_fraction(double value) {
  FUZZ_CHECK(value >= 0.0 && value <= 1.0);
}

void check_report(const Report& report) {
  FUZZ_CHECK(report.busy_ns >= 0);
  FUZZ_CHECK(report.window.length_ns() < 0 || report.busy_ns <= report.window.length_ns());
  check_fraction(report.busy_fraction);
  for (const PidUsage& usage : report.pids) {
    FUZZ_CHECK(usage.busy_ns >= 0 && usage.busy_ns <= report.busy_ns);
    check_fraction(usage.share);
  }
  for (const TenantUsage& usage : report.tenants)
    check_fraction(usage.share);
  FUZZ_CHECK(report.overlaps.examples.size() <= report.overlaps.count);
  FUZZ_CHECK(report.same_stream_overlaps.examples.size() <= report.same_stream_overlaps.count);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  bool ok = false;
  std::string error;
  const Trace trace = parsed(text, ok, error);
  if (!ok) {
    FUZZ_CHECK(!error.empty());
    return 0;
  }

  std::string written;
  for (std::size_t i = 0; i < trace.kernels.size(); ++i) {
    const KernelRecord& kernel = trace.kernels[i];
    FUZZ_CHECK(kernel.pid > 0);
    FUZZ_CHECK(kernel.device >= 0);
    FUZZ_CHECK(kernel.start_ns >= 0 && kernel.end_ns >= kernel.start_ns);
    FUZZ_CHECK(!kernel.name.empty());
    FUZZ_CHECK(kernel.name.find(' ') == std::string::npos);
    FUZZ_CHECK(kernel.line >= 1);
    if (i > 0) {
      const KernelRecord& previous = trace.kernels[i - 1];
      FUZZ_CHECK(std::tie(previous.start_ns, previous.end_ns, previous.line) <
                 std::tie(kernel.start_ns, kernel.end_ns, kernel.line));
    }
    written += std::to_string(kernel.pid) + ' ' + std::to_string(kernel.device) + ' ' +
               std::to_string(kernel.stream) + ' ' + std::to_string(kernel.start_ns) + ' ' +
               std::to_string(kernel.end_ns) + ' ' + kernel.name + '\n';
  }
  const Trace again = parsed(written, ok, error);
  FUZZ_CHECK(ok);
  FUZZ_CHECK(again.kernels.size() == trace.kernels.size());
  for (std::size_t i = 0; i < trace.kernels.size(); ++i) {
    KernelRecord expected = trace.kernels[i];
    expected.line = again.kernels[i].line;  // lines are renumbered
    FUZZ_CHECK(again.kernels[i] == expected);
  }

  for (const int device : devices(trace)) {
    check_report(analyze(trace, {.device = device}));
    // The same pids in one named tenant, and a window that cuts kernels.
    std::set<pid_t> pids;
    for (const KernelRecord& kernel : trace.kernels)
      if (kernel.device == device) pids.insert(kernel.pid);
    const KernelRecord& first = trace.kernels.front();
    check_report(analyze(trace, {.device = device,
                                 .from_ns = first.start_ns + first.duration_ns() / 2,
                                 .to_ns = trace.kernels.back().end_ns,
                                 .tenants = {{"all", pids}}}));
  }
  return 0;
}
