// gpulimit-trace: how much of each GPU every process and tenant used,
// according to a kernel trace. A thin front end over the gpulimit_trace
// library; the table and JSON it prints are the library's.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "gpulimit/trace/trace.h"
#include "option_values.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitOverlap = 1;
constexpr int kExitBadInput = 2;

struct Arguments {
  std::string path;
  std::string device;
  std::string from_ns;
  std::string to_ns;
  std::vector<std::string> tenants;
  bool check_no_overlap = false;
  bool json = false;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "gpulimit-trace: %s\n", message.c_str());
  return kExitBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  namespace trace = gpulimit::trace;

  CLI::App app{
      "Reports how much of each GPU every process and tenant used, according to a kernel\n"
      "trace: per device, each tenant's and pid's kernels, GPU seconds and share of the\n"
      "window, how busy the device was, and how many pairs of kernels of different\n"
      "processes overlapped. Trace format (tools/trace/README.md), one line per kernel:\n"
      "  <pid> <device> <stream> <start_ns> <end_ns> <name>\n",
      "gpulimit-trace"};
  app.footer(
      "Times are CLOCK_MONOTONIC nanoseconds, as in the trace.\n"
      "Exit status: 0 success; 1 --check-no-overlap found kernels of different processes\n"
      "overlapping; 2 bad arguments, or a trace that cannot be read or is malformed.");
  Arguments args;
  app.add_option("FILE", args.path, "The trace, e.g. the file FAKECUDA_TRACE named")
      ->required()
      ->type_name("");
  app.add_option("--device", args.device,
                 "Report only this physical device (default: every device in the trace)")
      ->type_name("N");
  app.add_option("--from", args.from_ns,
                 "Start of the window (default: start of the device's first kernel)")
      ->type_name("NS");
  app.add_option("--to", args.to_ns,
                 "End of the window, exclusive (default: end of the device's last kernel)")
      ->type_name("NS");
  app.add_option("--tenant", args.tenants,
                 "Count these pids as one tenant; repeatable. A pid in no tenant is listed on "
                 "its own")
      ->type_name("NAME=PID,PID")
      ->allow_extra_args(false);
  app.add_flag("--check-no-overlap", args.check_no_overlap,
               "Exit with status 1 if kernels of different processes overlap on a device");
  app.add_flag("--json", args.json, "Print JSON instead of tables");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help arrives here as a "success"; CLI11 prints it.
    if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(error);
    return fail(error.what());
  }

  std::string error;
  trace::AnalysisOptions options;
  if (!trace::cli::parse_tenants(args.tenants, options.tenants, error)) return fail(error);
  std::int64_t value = 0;
  if (!args.from_ns.empty()) {
    if (!trace::cli::parse_non_negative("--from", args.from_ns,
                                        std::numeric_limits<std::int64_t>::max(), value, error)) {
      return fail(error);
    }
    options.from_ns = value;
  }
  if (!args.to_ns.empty()) {
    if (!trace::cli::parse_non_negative("--to", args.to_ns,
                                        std::numeric_limits<std::int64_t>::max(), value, error)) {
      return fail(error);
    }
    options.to_ns = value;
  }
  if (options.from_ns && options.to_ns && *options.to_ns <= *options.from_ns) {
    return fail("the window [--from, --to) is empty: --to " + args.to_ns + " is not after --from " +
                args.from_ns);
  }
  std::vector<int> devices;
  if (!args.device.empty()) {
    if (!trace::cli::parse_non_negative("--device", args.device, std::numeric_limits<int>::max(),
                                        value, error)) {
      return fail(error);
    }
    devices.push_back(static_cast<int>(value));
  }

  const trace::ParseResult loaded = trace::load(args.path);
  if (!loaded) return fail(loaded.error().message());
  if (devices.empty()) devices = trace::devices(*loaded);

  std::vector<trace::Report> reports;
  for (const int device : devices) {
    options.device = device;
    reports.push_back(trace::analyze(*loaded, options));
  }

  if (args.json) {
    trace::write_json(std::cout, reports);
  } else if (reports.empty()) {
    std::cout << args.path << ": no kernels\n";
  } else {
    const char* separator = "";
    for (const trace::Report& report : reports) {
      std::cout << separator << report;
      separator = "\n";
    }
  }
  std::cout.flush();

  int status = kExitOk;
  if (args.check_no_overlap) {
    for (const trace::Report& report : reports) {
      if (report.overlaps.count == 0) continue;
      std::fprintf(stderr,
                   "gpulimit-trace: kernels of different processes overlap on device %d "
                   "(%zu pairs)\n",
                   report.device, report.overlaps.count);
      status = kExitOverlap;
    }
  }
  return status;
}
