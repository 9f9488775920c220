#include "command_line.h"

#include <errno.h>

#include "gpulimit/byte_size.h"

namespace workloads {

void add_driver_options(CLI::App& app, DriverOptions& options) {
  app.add_option("--device", options.device, "Device ordinal, as the driver numbers them")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--access",
         [&options](const std::string& text) { options.access = *parse_access_path(text); },
         "How driver functions are obtained: linked (this program's link-time "
         "references), dlsym (dlopen libcuda.so.1, dlsym each exported name), proc "
         "(cuGetProcAddress, the rest through it), proc-v2 (cuGetProcAddress_v2)")
      ->check(CLI::IsMember({"linked", "dlsym", "proc", "proc-v2"}))
      ->default_str("linked");
  app.add_option_function<std::string>(
         "--stream-mode",
         [&options](const std::string& text) { options.stream_mode = *parse_stream_mode(text); },
         "Default-stream semantics of the functions obtained: legacy, or per-thread "
         "(the _ptsz/_ptds variants, as with nvcc --default-stream per-thread)")
      ->check(CLI::IsMember({"legacy", "per-thread"}))
      ->default_str("legacy");
}

CLI::Option* add_byte_size_option(CLI::App& app, const std::string& name, uint64_t& bytes,
                                  const std::string& description) {
  // A transform, so that CLI11 then reads plain digits into the integer.
  CLI::Validator to_bytes(
      [](std::string& text) {
        std::optional<uint64_t> parsed = gpulimit::parse_byte_size(text);
        if (!parsed) return "'" + text + "' is not a size such as 4096, 512M or 10G";
        text = std::to_string(*parsed);
        return std::string();
      },
      "SIZE");
  return app.add_option(name, bytes, description)->transform(to_bytes);
}

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string(program_invocation_short_name) + ": " + e.what() + " (see --help)\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    return status == 0 ? kExitOk : kExitUsage;
  }
  return std::nullopt;
}

}  // namespace workloads
