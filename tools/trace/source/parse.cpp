#include "gpulimit/trace/parse.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <limits>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

namespace gpulimit::trace {
namespace {

constexpr std::size_t kFieldCount = 6;
constexpr std::string_view kLineShape = "<pid> <device> <stream> <start_ns> <end_ns> <name>";

bool is_ignored(std::string_view line) {
  return line.empty() || line.front() == '#' ||
         line.find_first_not_of(" \t") == std::string_view::npos;
}

// Keeps empty fields, so that a doubled or stray space is reported rather
// than silently absorbed.
std::vector<std::string_view> split_on_spaces(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t space = line.find(' ', start);
    fields.push_back(line.substr(start, space - start));
    if (space == std::string_view::npos) return fields;
    start = space + 1;
  }
}

std::string describe_empty_field(std::size_t index, std::size_t field_count) {
  if (index == 0) return "line starts with a space; fields are separated by single spaces";
  if (index + 1 == field_count)
    return "line ends with a space; fields are separated by single spaces";
  return "two spaces in a row after field " + std::to_string(index) +
         "; fields are separated by single spaces";
}

// A decimal number in [min, max of T]. Digits only: std::from_chars alone
// would also accept a leading '-'.
template <typename T>
bool parse_decimal(std::string_view field_name, std::string_view text, T min, T& out,
                   std::string& reason) {
  T value{};
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || text.front() < '0' || text.front() > '9' || stop != end ||
      (error != std::errc{} && error != std::errc::result_out_of_range)) {
    reason = std::string(field_name) + " '" + std::string(text) + "' is not a decimal number";
    return false;
  }
  if (error == std::errc::result_out_of_range || value < min) {
    reason = std::string(field_name) + " " + std::string(text) + " is out of range [" +
             std::to_string(min) + ", " + std::to_string(std::numeric_limits<T>::max()) + "]";
    return false;
  }
  out = value;
  return true;
}

bool check_kernel_name(std::string_view name, std::string& reason) {
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", byte);
      reason = std::string("kernel name contains control character ") + hex;
      if (c == '\r') reason += " (CRLF line endings?)";
      return false;
    }
  }
  return true;
}

bool parse_kernel_line(std::string_view line, KernelRecord& out, std::string& reason) {
  const std::vector<std::string_view> fields = split_on_spaces(line);
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].empty()) {
      reason = describe_empty_field(i, fields.size());
      return false;
    }
  }
  if (fields.size() != kFieldCount) {
    reason = "expected " + std::to_string(kFieldCount) + " fields \"" + std::string(kLineShape) +
             "\", found " + std::to_string(fields.size());
    if (fields.size() > kFieldCount) reason += " (kernel names may not contain spaces)";
    return false;
  }
  if (!parse_decimal<pid_t>("pid", fields[0], 1, out.pid, reason) ||
      !parse_decimal<int>("device", fields[1], 0, out.device, reason) ||
      !parse_decimal<std::uint64_t>("stream", fields[2], 0, out.stream, reason) ||
      !parse_decimal<std::int64_t>("start_ns", fields[3], 0, out.start_ns, reason) ||
      !parse_decimal<std::int64_t>("end_ns", fields[4], 0, out.end_ns, reason) ||
      !check_kernel_name(fields[5], reason)) {
    return false;
  }
  if (out.end_ns < out.start_ns) {
    reason = "end_ns " + std::string(fields[4]) + " is before start_ns " + std::string(fields[3]);
    return false;
  }
  out.name = std::string(fields[5]);
  return true;
}

[[noreturn]] void abort_on_failed_result(const ParseError& error) {
  std::fprintf(stderr, "gpulimit::trace: dereferenced a failed parse result: %s\n",
               error.message().c_str());
  std::abort();
}

}  // namespace

std::string ParseError::message() const {
  if (line == 0) return source + ": " + reason;
  return source + ":" + std::to_string(line) + ": " + reason;
}

const Trace& ParseResult::operator*() const& {
  if (const Trace* trace = std::get_if<Trace>(&value_)) return *trace;
  abort_on_failed_result(std::get<ParseError>(value_));
}

Trace ParseResult::operator*() && {
  if (Trace* trace = std::get_if<Trace>(&value_)) return std::move(*trace);
  abort_on_failed_result(std::get<ParseError>(value_));
}

const ParseError& ParseResult::error() const {
  static const ParseError kNoError{"", 0, "no error"};
  const ParseError* error = std::get_if<ParseError>(&value_);
  return error ? *error : kNoError;
}

ParseResult parse(std::istream& in, std::string_view source) {
  Trace trace;
  std::string line;
  std::size_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (is_ignored(line)) continue;
    KernelRecord kernel;
    std::string reason;
    if (!parse_kernel_line(line, kernel, reason)) {
      return ParseError{std::string(source), line_number, std::move(reason)};
    }
    kernel.line = line_number;
    trace.kernels.push_back(std::move(kernel));
  }
  if (in.bad()) {
    return ParseError{std::string(source), 0,
                      "read error after line " + std::to_string(line_number)};
  }
  std::sort(
      trace.kernels.begin(), trace.kernels.end(), [](const KernelRecord& a, const KernelRecord& b) {
        return std::tie(a.start_ns, a.end_ns, a.line) < std::tie(b.start_ns, b.end_ns, b.line);
      });
  return trace;
}

ParseResult load(const std::filesystem::path& path) {
  // A directory opens fine and then reads as an empty trace; say what it is.
  std::error_code status_error;
  if (std::filesystem::is_directory(path, status_error)) {
    return ParseError{path.string(), 0, "is a directory"};
  }
  std::ifstream in(path);
  if (!in) {
    const int open_errno = errno;
    return ParseError{path.string(), 0,
                      "cannot open: " + std::generic_category().message(open_errno)};
  }
  return parse(in, path.string());
}

}  // namespace gpulimit::trace
