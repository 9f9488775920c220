#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "gpulimit/cupti_trace/kernel_line.h"
#include "gpulimit/trace/trace.h"

namespace gpulimit::cupti_trace {
namespace {

std::string sanitized(std::string_view name, std::size_t capacity = 64) {
  char out[64];
  const std::size_t size = sanitize_name(name, out, capacity);
  return std::string(out, size);
}

TEST(SanitizeName, KeepsAMangledName) {
  // Arrange, Act, Assert
  EXPECT_EQ(sanitized("_Z4spinyPy"), "_Z4spinyPy");
}

TEST(SanitizeName, ReplacesSpacesAndControlCharacters) {
  // Arrange
  const std::string name = std::string("void k<int>(float*, int)\t\r\n") + '\x7f' + '\x01' + "x";

  // Act
  const std::string result = sanitized(name);

  // Assert
  EXPECT_EQ(result, "void_k<int>(float*,_int)_____x");
}

TEST(SanitizeName, KeepsBytesAboveAscii) {
  // Arrange: UTF-8 in a demangled name
  const std::string name = "k\xc3\xa9";

  // Act, Assert
  EXPECT_EQ(sanitized(name), name);
}

TEST(SanitizeName, NamesAnEmptyName) {
  EXPECT_EQ(sanitized(""), std::string(kUnnamedKernel));
}

TEST(SanitizeName, CutsAtTheCapacity) {
  EXPECT_EQ(sanitized("abcdefgh", 3), "abc");
}

TEST(FormatLine, WritesTheSixFieldsAndANewline) {
  // Arrange
  const KernelInterval kernel{.pid = 4242,
                              .device = 3,
                              .stream = 7,
                              .start_ns = 1'000'000,
                              .end_ns = 1'250'000,
                              .name = "_Z4axpyfPfS_"};

  // Act
  const TraceLine line = format_line(kernel);

  // Assert
  EXPECT_EQ(line.text(), "4242 3 7 1000000 1250000 _Z4axpyfPfS_\n");
}

TEST(FormatLine, WritesTheLargestNumbersInFull) {
  // Arrange
  const KernelInterval kernel{.pid = 2147483647,
                              .device = 4294967295u,
                              .stream = UINT64_MAX,
                              .start_ns = UINT64_MAX - 1,
                              .end_ns = UINT64_MAX,
                              .name = "k"};

  // Act
  const TraceLine line = format_line(kernel);

  // Assert
  EXPECT_EQ(line.text(),
            "2147483647 4294967295 18446744073709551615 18446744073709551614 "
            "18446744073709551615 k\n");
}

TEST(FormatLine, CutsALongNameAndStillEndsTheLine) {
  // Arrange
  const std::string name(5000, 'n');
  const KernelInterval kernel{
      .pid = 1, .device = 0, .stream = 0, .start_ns = 1, .end_ns = 2, .name = name};

  // Act
  const TraceLine line = format_line(kernel);

  // Assert
  EXPECT_EQ(line.text(), "1 0 0 1 2 " + std::string(kMaxNameBytes, 'n') + "\n");
}

TEST(FormatLine, WritesWhatTheTraceReaderAccepts) {
  // Arrange: a name with everything the format forbids
  const std::string name = "void k<int>(float*,\tint)\r";
  const KernelInterval kernel{
      .pid = 99, .device = 1, .stream = 2, .start_ns = 10, .end_ns = 20, .name = name};

  // Act
  std::istringstream in(std::string(format_line(kernel).text()));
  const trace::ParseResult parsed = trace::parse(in);

  // Assert
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  ASSERT_EQ(parsed->kernels.size(), 1u);
  const trace::KernelRecord& record = parsed->kernels.front();
  EXPECT_EQ(record.pid, 99);
  EXPECT_EQ(record.device, 1);
  EXPECT_EQ(record.stream, 2u);
  EXPECT_EQ(record.start_ns, 10);
  EXPECT_EQ(record.end_ns, 20);
  EXPECT_EQ(record.name, "void_k<int>(float*,_int)_");
}

}  // namespace
}  // namespace gpulimit::cupti_trace
