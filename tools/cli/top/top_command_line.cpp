#include "top/top_command_line.h"

#include <optional>

#include "gpulimit/options/values.h"

namespace gpulimit::cli {
namespace {

constexpr std::chrono::milliseconds kLeastInterval{100};
constexpr std::chrono::milliseconds kMostInterval{3'600'000};
constexpr uint64_t kMostIterations = 1'000'000'000;

bool parse_iterations(std::string_view text, uint64_t& out) {
  if (!options::all_digits(text) || text.size() > 10) return false;
  const uint64_t value = std::stoull(std::string(text));
  if (value < 1 || value > kMostIterations) return false;
  out = value;
  return true;
}

}  // namespace

bool parse_interval(std::string_view text, std::chrono::milliseconds& out) {
  const std::size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if (!options::all_digits(whole) || whole.size() > 7) return false;
  if (dot != std::string_view::npos && (!options::all_digits(fraction) || fraction.size() > 3))
    return false;
  int64_t ms = std::stoll(std::string(whole)) * 1000;
  int64_t scale = 100;
  for (const char digit : fraction) {
    ms += (digit - '0') * scale;
    scale /= 10;
  }
  if (ms < kLeastInterval.count() || ms > kMostInterval.count()) return false;
  out = std::chrono::milliseconds(ms);
  return true;
}

bool parse_top_arguments(const std::vector<std::string_view>& args, TopOptions& out,
                         std::string& error) {
  TopOptions options;
  std::optional<std::string_view> interval;
  std::optional<std::string_view> iterations;
  bool batch_given = false;
  const auto usage = [&error](const std::string& what) {
    error = "top: " + what + " (" + kTopUsage + ")";
    return false;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    std::optional<std::string_view> value;
    if (const std::size_t equals = arg.find('='); arg.starts_with("--") && equals != arg.npos) {
      value = arg.substr(equals + 1);
      arg = arg.substr(0, equals);
    }
    if (arg == "--interval" || arg == "--iterations") {
      if (!value) {
        if (i + 1 == args.size()) return usage(std::string(arg) + " needs a value");
        value = args[++i];
      }
      std::optional<std::string_view>& slot = arg == "--interval" ? interval : iterations;
      if (slot) return usage(std::string(arg) + " is given twice");
      slot = value;
    } else if (value) {
      return usage(std::string(arg) + " takes no value");
    } else if (arg == "--batch") {
      if (batch_given) return usage("--batch is given twice");
      batch_given = true;
    } else if (arg == "-h" || arg == "--help") {
      options.help = true;
    } else {
      return usage("unknown argument " + std::string(args[i]));
    }
  }
  if (interval && !parse_interval(*interval, options.interval)) {
    return usage("--interval needs seconds from 0.1 to 3600 (such as 1 or 0.5), not '" +
                 std::string(*interval) + "'");
  }
  if (iterations && !parse_iterations(*iterations, options.iterations)) {
    return usage("--iterations needs a whole number from 1 to " + std::to_string(kMostIterations) +
                 ", not '" + std::string(*iterations) + "'");
  }
  options.batch = batch_given;
  out = options;
  return true;
}

}  // namespace gpulimit::cli
