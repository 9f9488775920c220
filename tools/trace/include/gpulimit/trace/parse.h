// Reading a trace (format in trace.h). Strict on purpose: the writers are our
// own simulator and tracer, so a malformed line is a bug to report with its
// line number, never a line to skip.
#pragma once

#include <cstddef>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "gpulimit/trace/records.h"

namespace gpulimit::trace {

struct ParseError {
  std::string source = {};  // the file's path, or the name given to parse()
  std::size_t line = 0;     // 1-based; 0 when no single line is at fault (e.g. cannot open)
  std::string reason = {};

  // "trace.txt:7: expected 6 fields ..., found 5": one line for a user.
  std::string message() const;
};

// A trace or the first error that stopped reading it. Dereferences like
// std::optional; dereferencing an error prints the error and aborts rather
// than being undefined, so a test that forgot to check fails legibly.
class ParseResult {
 public:
  ParseResult(Trace trace) : value_(std::move(trace)) {}
  ParseResult(ParseError error) : value_(std::move(error)) {}

  bool ok() const { return std::holds_alternative<Trace>(value_); }
  explicit operator bool() const { return ok(); }

  const Trace& operator*() const&;
  // By value, so that `const Trace& t = *load(path);` extends the lifetime
  // instead of dangling.
  Trace operator*() &&;
  const Trace* operator->() const { return &**this; }

  // Only meaningful when !ok().
  const ParseError& error() const;

 private:
  std::variant<Trace, ParseError> value_;
};

// `source` names the input in errors.
ParseResult parse(std::istream& in, std::string_view source = "<trace>");
ParseResult load(const std::filesystem::path& path);

}  // namespace gpulimit::trace
