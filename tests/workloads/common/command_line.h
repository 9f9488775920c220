// Command-line pieces both workloads share: how to reach the driver, sizes,
// and how parse errors end the program.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "driver_api.h"

namespace workloads {

// Exit statuses. Running out of memory or time is a result, reported on
// stdout with status 0.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the driver failed in a way the workload did not expect
inline constexpr int kExitUsage = 2;    // the command line was wrong

struct DriverOptions {
  int device = 0;
  AccessPath access = AccessPath::linked;
  StreamMode stream_mode = StreamMode::legacy;
};

// Adds --device, --access and --stream-mode.
void add_driver_options(CLI::App& app, DriverOptions& options);

// Adds an option that takes a size such as 512M or 10G (see gpulimit/byte_size.h).
CLI::Option* add_byte_size_option(CLI::App& app, const std::string& name, uint64_t& bytes,
                                  const std::string& description);

// Parses argv. Returns the status to exit with when the program should stop
// here: kExitOk after --help, kExitUsage after a usage error, which is
// reported as one line on stderr.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

}  // namespace workloads
