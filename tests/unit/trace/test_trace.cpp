#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <string_view>

#include "gpulimit/trace/trace.h"

namespace gpulimit::trace {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Traces are written as text, as the simulator writes them, so that each test
// reads like the file it stands for.
Trace parse_ok(std::string_view text) {
  std::istringstream in{std::string(text)};
  ParseResult result = parse(in);
  EXPECT_TRUE(result.ok()) << result.error().message();
  return result.ok() ? *std::move(result) : Trace{};
}

ParseError parse_error(std::string_view text) {
  std::istringstream in{std::string(text)};
  const ParseResult result = parse(in, "t.trace");
  EXPECT_FALSE(result.ok());
  return result.error();
}

// ---------------------------------------------------------------- parsing

TEST(TraceParse, ReadsAllSixFields) {
  const Trace trace = parse_ok("4242 3 17 1000 2500 _Z4axpyfPfS_\n");

  ASSERT_EQ(trace.kernels.size(), 1u);
  const KernelRecord& kernel = trace.kernels[0];
  EXPECT_EQ(kernel.pid, 4242);
  EXPECT_EQ(kernel.device, 3);
  EXPECT_EQ(kernel.stream, 17u);
  EXPECT_EQ(kernel.start_ns, 1000);
  EXPECT_EQ(kernel.end_ns, 2500);
  EXPECT_EQ(kernel.name, "_Z4axpyfPfS_");
  EXPECT_EQ(kernel.line, 1u);
  EXPECT_EQ(kernel.duration_ns(), 1500);
}

TEST(TraceParse, IgnoresCommentsAndBlankLines) {
  const Trace trace =
      parse_ok("# pid device stream start_ns end_ns name\n\n   \n\t\n1 0 1 0 10 k\n#\n");

  ASSERT_EQ(trace.kernels.size(), 1u);
  EXPECT_EQ(trace.kernels[0].line, 5u);
}

TEST(TraceParse, OrdersKernelsByStartAndKeepsTheirLines) {
  const Trace trace = parse_ok(
      "2 0 1 300 400 c\n"
      "1 0 1 100 200 a\n"
      "3 0 1 200 300 b\n");

  ASSERT_EQ(trace.kernels.size(), 3u);
  EXPECT_EQ(trace.kernels[0].name, "a");
  EXPECT_EQ(trace.kernels[0].line, 2u);
  EXPECT_EQ(trace.kernels[1].name, "b");
  EXPECT_EQ(trace.kernels[2].name, "c");
  EXPECT_EQ(trace.kernels[2].line, 1u);
}

TEST(TraceParse, AcceptsZeroLengthKernelsAndAMissingFinalNewline) {
  const Trace trace = parse_ok("1 0 1 5 5 empty");

  ASSERT_EQ(trace.kernels.size(), 1u);
  EXPECT_EQ(trace.kernels[0].duration_ns(), 0);
}

TEST(TraceParse, EmptyInputIsAnEmptyTrace) {
  EXPECT_TRUE(parse_ok("").kernels.empty());
  EXPECT_TRUE(parse_ok("# only a comment\n\n").kernels.empty());
}

struct MalformedLine {
  std::string test_name;
  std::string line;
  std::string reason;
};

// What ctest and failure messages show for a case: the line itself.
void PrintTo(const MalformedLine& malformed, std::ostream* out) {
  *out << ::testing::PrintToString(malformed.line);
}

std::string malformed_line_name(const ::testing::TestParamInfo<MalformedLine>& param_info) {
  return param_info.param.test_name;
}

class TraceParseMalformed : public ::testing::TestWithParam<MalformedLine> {};

TEST_P(TraceParseMalformed, ReportsTheLineNumberAndWhy) {
  // Line 4: after a comment, a good line and a blank line.
  const ParseError error = parse_error("# header\n1 0 1 0 10 ok\n\n" + GetParam().line + "\n");

  EXPECT_EQ(error.source, "t.trace");
  EXPECT_EQ(error.line, 4u);
  EXPECT_THAT(error.reason, HasSubstr(GetParam().reason));
  EXPECT_THAT(error.message(), ::testing::StartsWith("t.trace:4: "));
}

INSTANTIATE_TEST_SUITE_P(
    Lines, TraceParseMalformed,
    ::testing::Values(
        MalformedLine{"TooFewFields", "1 0 1 0 10", "expected 6 fields"},
        MalformedLine{"SpaceInName", "1 0 1 0 10 my kernel",
                      "found 7 (kernel names may not contain spaces)"},
        MalformedLine{"DoubledSpace", "1 0  1 0 10 k", "two spaces in a row after field 2"},
        MalformedLine{"LeadingSpace", " 1 0 1 0 10 k", "line starts with a space"},
        MalformedLine{"TrailingSpace", "1 0 1 0 10 k ", "line ends with a space"},
        MalformedLine{"PidNotANumber", "x 0 1 0 10 k", "pid 'x' is not a decimal number"},
        MalformedLine{"TrailingJunk", "1 0 1 0 10x k", "end_ns '10x' is not a decimal number"},
        MalformedLine{"NegativeTime", "1 0 1 -5 10 k", "start_ns '-5' is not a decimal number"},
        MalformedLine{"PidZero", "0 0 1 0 10 k", "pid 0 is out of range"},
        MalformedLine{"TimeOverflows", "1 0 1 99999999999999999999 10 k",
                      "start_ns 99999999999999999999 is out of range"},
        MalformedLine{"EndBeforeStart", "1 0 1 20 10 k", "end_ns 10 is before start_ns 20"},
        MalformedLine{"CarriageReturn", "1 0 1 0 10 k\r",
                      "control character 0x0d (CRLF line endings?)"},
        MalformedLine{"TabSeparated", "1\t0 1 0 10 k", "expected 6 fields"}),
    malformed_line_name);

TEST(TraceParse, StopsAtTheFirstMalformedLine) {
  const ParseError error = parse_error("1 0 1 0 10 k\nbad\nworse\n");

  EXPECT_EQ(error.line, 2u);
}

TEST(TraceLoad, ReadsAFile) {
  const ParseResult sut = load(GPULIMIT_TRACE_TEST_DATA "/time_sliced.trace");

  ASSERT_TRUE(sut) << sut.error().message();
  EXPECT_EQ(sut->kernels.size(), 6u);
  EXPECT_EQ(devices(*sut), (std::vector<int>{0, 1}));
}

TEST(TraceLoad, NamesTheFileInErrors) {
  const ParseResult sut = load(GPULIMIT_TRACE_TEST_DATA "/malformed.trace");

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().line, 5u);
  EXPECT_EQ(sut.error().message(),
            GPULIMIT_TRACE_TEST_DATA "/malformed.trace:5: end_ns 2500 is before start_ns 3000");
}

TEST(TraceLoad, ReportsAMissingFileWithoutALine) {
  const ParseResult sut = load("/nonexistent/gpulimit.trace");

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().line, 0u);
  EXPECT_EQ(sut.error().message(),
            "/nonexistent/gpulimit.trace: cannot open: No such file or directory");
}

TEST(TraceLoad, RefusesADirectory) {
  const ParseResult sut = load(GPULIMIT_TRACE_TEST_DATA);

  ASSERT_FALSE(sut);
  EXPECT_THAT(sut.error().message(), HasSubstr("is a directory"));
}

TEST(TraceLoadDeathTest, DereferencingAFailedLoadShowsTheError) {
  const ParseResult sut = load("/nonexistent/gpulimit.trace");

  EXPECT_DEATH((void)sut->kernels, "dereferenced a failed parse result: .*cannot open");
}

// ---------------------------------------------------------------- shares

TEST(TraceAnalysis, SharesOfTimeSlicedProcesses) {
  const Trace trace = parse_ok(
      "1 0 1 0 300 a\n"
      "2 0 1 300 600 b\n"
      "1 0 1 600 700 a\n"
      "3 0 1 700 1000 c\n");

  const Report sut = analyze(trace, {.device = 0});

  EXPECT_EQ(sut.window, (Window{0, 1000}));
  EXPECT_EQ(sut.kernels, 4u);
  ASSERT_EQ(sut.pids.size(), 3u);
  EXPECT_EQ(sut.pids[0].pid, 1);
  EXPECT_EQ(sut.pids[0].kernels, 2u);
  EXPECT_EQ(sut.pids[0].busy_ns, 400);
  EXPECT_DOUBLE_EQ(sut.share_of(1), 0.4);
  EXPECT_DOUBLE_EQ(sut.share_of(2), 0.3);
  EXPECT_DOUBLE_EQ(sut.share_of(3), 0.3);
  EXPECT_EQ(sut.busy_ns, 1000);
  EXPECT_DOUBLE_EQ(sut.busy_fraction, 1.0);
}

TEST(TraceAnalysis, DefaultWindowSpansTheDevicesKernelsOnly) {
  const Trace trace = parse_ok(
      "1 1 1 0 5000 elsewhere\n"
      "1 0 1 100 200 a\n"
      "2 0 1 400 500 b\n");

  const Report sut = analyze(trace, {.device = 0});

  EXPECT_EQ(sut.window, (Window{100, 500}));
  EXPECT_EQ(sut.kernels, 2u);
  EXPECT_DOUBLE_EQ(sut.share_of(1), 0.25);
  EXPECT_DOUBLE_EQ(sut.share_of(2), 0.25);
}

TEST(TraceAnalysis, WindowClipsKernels) {
  const Trace trace = parse_ok(
      "1 0 1 0 100 a\n"
      "2 0 1 100 300 b\n"
      "3 0 1 0 50 ends_where_the_window_starts\n"
      "3 0 1 250 400 starts_where_the_window_ends\n");

  const Report sut = analyze(trace, {.device = 0, .from_ns = 50, .to_ns = 250});

  EXPECT_EQ(sut.window, (Window{50, 250}));
  EXPECT_EQ(sut.kernels, 2u);
  ASSERT_NE(sut.find(1), nullptr);
  EXPECT_EQ(sut.find(1)->busy_ns, 50);
  EXPECT_DOUBLE_EQ(sut.share_of(1), 0.25);
  EXPECT_EQ(sut.find(2)->busy_ns, 150);
  EXPECT_DOUBLE_EQ(sut.share_of(2), 0.75);
  EXPECT_EQ(sut.find(3), nullptr);
  EXPECT_DOUBLE_EQ(sut.share_of(3), 0.0);
}

TEST(TraceAnalysis, OneSidedWindowKeepsTheOtherDefault) {
  const Trace trace = parse_ok("1 0 1 0 100 a\n2 0 1 100 400 b\n");

  const Report sut = analyze(trace, {.device = 0, .from_ns = 200});

  EXPECT_EQ(sut.window, (Window{200, 400}));
  EXPECT_DOUBLE_EQ(sut.share_of(1), 0.0);
  EXPECT_DOUBLE_EQ(sut.share_of(2), 1.0);
}

TEST(TraceAnalysis, WindowEndingBeforeItStartsIsEmpty) {
  const Trace trace = parse_ok("1 0 1 0 100 a\n");

  const Report sut = analyze(trace, {.device = 0, .from_ns = 80, .to_ns = 20});

  EXPECT_EQ(sut.window, (Window{80, 80}));
  EXPECT_DOUBLE_EQ(sut.share_of(1), 0.0);
  EXPECT_DOUBLE_EQ(sut.busy_fraction, 0.0);
}

TEST(TraceAnalysis, ZeroLengthKernelsAreCountedButTakeNoTime) {
  const Trace trace = parse_ok("1 0 1 0 100 a\n2 0 1 100 100 at_the_end\n");

  const Report sut = analyze(trace, {.device = 0});

  EXPECT_EQ(sut.kernels, 2u);
  ASSERT_NE(sut.find(2), nullptr);
  EXPECT_EQ(sut.find(2)->kernels, 1u);
  EXPECT_EQ(sut.find(2)->busy_ns, 0);
  EXPECT_EQ(sut.overlaps.count, 0u);
}

// ---------------------------------------------------------------- tenants

TEST(TraceAnalysis, GroupsPidsIntoTenantsAndLeavesOthersAlone) {
  const Trace trace = parse_ok(
      "1 0 1 0 100 a\n"
      "2 0 1 100 300 a\n"
      "3 0 1 300 400 b\n"
      "4 0 1 400 1000 stranger\n");

  const Report sut = analyze(trace, {.device = 0, .tenants = {{"a", {1, 2}}, {"b", {3, 99}}}});

  ASSERT_EQ(sut.tenants.size(), 3u);
  EXPECT_EQ(sut.tenants[0].name, "a");
  EXPECT_TRUE(sut.tenants[0].named);
  EXPECT_THAT(sut.tenants[0].pids, ElementsAre(1, 2));
  EXPECT_EQ(sut.tenants[0].kernels, 2u);
  EXPECT_EQ(sut.tenants[0].busy_ns, 300);
  EXPECT_DOUBLE_EQ(sut.share_of_tenant("a"), 0.3);

  EXPECT_THAT(sut.tenants[1].pids, ElementsAre(3, 99));
  EXPECT_EQ(sut.tenants[1].kernels, 1u);
  EXPECT_DOUBLE_EQ(sut.share_of_tenant("b"), 0.1);

  EXPECT_EQ(sut.tenants[2].name, "pid 4");
  EXPECT_FALSE(sut.tenants[2].named);
  EXPECT_THAT(sut.tenants[2].pids, ElementsAre(4));
  EXPECT_DOUBLE_EQ(sut.share_of_tenant("pid 4"), 0.6);
  EXPECT_EQ(sut.find_tenant("nobody"), nullptr);
}

TEST(TraceAnalysis, TenantThatRanNothingIsReportedWithZeroShare) {
  const Trace trace = parse_ok("1 0 1 0 100 a\n");

  const Report sut = analyze(trace, {.device = 0, .tenants = {{"idle", {7}}}});

  const TenantUsage* idle = sut.find_tenant("idle");
  ASSERT_NE(idle, nullptr);
  EXPECT_EQ(idle->kernels, 0u);
  EXPECT_DOUBLE_EQ(idle->share, 0.0);
}

TEST(TraceAnalysis, TenantBusyTimeIsTheUnionOfItsPids) {
  const Trace trace = parse_ok("1 0 1 0 100 a\n2 0 1 50 200 a\n");

  const Report sut = analyze(trace, {.device = 0, .tenants = {{"a", {1, 2}}}});

  EXPECT_EQ(sut.find_tenant("a")->busy_ns, 200);
  EXPECT_DOUBLE_EQ(sut.share_of_tenant("a"), 1.0);
}

// ---------------------------------------------------------------- busy fraction

TEST(TraceAnalysis, BusyFractionLeavesGapsOut) {
  const Trace trace = parse_ok("1 0 1 0 100 a\n2 0 1 300 400 b\n");

  const Report sut = analyze(trace, {.device = 0});

  EXPECT_EQ(sut.busy_ns, 200);
  EXPECT_DOUBLE_EQ(sut.busy_fraction, 0.5);
}

TEST(TraceAnalysis, ConcurrentStreamsOfOneProcessCountOnce) {
  const Trace trace = parse_ok(
      "1 0 1 0 100 a\n"
      "1 0 2 50 150 b\n"
      "1 0 3 60 70 c\n"
      "1 0 1 250 300 d\n");

  const Report sut = analyze(trace, {.device = 0});

  EXPECT_EQ(sut.busy_ns, 200);
  EXPECT_DOUBLE_EQ(sut.busy_fraction, 200.0 / 300.0);
  EXPECT_EQ(sut.find(1)->busy_ns, 200);
  EXPECT_DOUBLE_EQ(sut.share_of(1), 200.0 / 300.0);
  EXPECT_EQ(sut.overlaps.count, 0u);
  EXPECT_EQ(sut.same_stream_overlaps.count, 0u);
}

// ---------------------------------------------------------------- overlaps

TEST(TraceAnalysis, FindsOverlapsBetweenProcesses) {
  const Trace trace = parse_ok(
      "1 0 1 0 1000 first\n"
      "2 0 1 500 1500 intruder\n"
      "1 0 2 600 800 second\n");

  const Report sut = analyze(trace, {.device = 0});

  EXPECT_EQ(sut.overlaps.count, 2u);
  ASSERT_EQ(sut.overlaps.examples.size(), 2u);
  const KernelOverlap& first = sut.overlaps.examples[0];
  EXPECT_EQ(first.earlier.name, "first");
  EXPECT_EQ(first.earlier.start_ns, 0);
  EXPECT_EQ(first.earlier.end_ns, 1000);
  EXPECT_EQ(first.later.name, "intruder");
  EXPECT_EQ(first.later.line, 2u);
  EXPECT_EQ(first.overlap_ns, 500);
  const KernelOverlap& second = sut.overlaps.examples[1];
  EXPECT_EQ(second.earlier.name, "intruder");
  EXPECT_EQ(second.later.name, "second");
  EXPECT_EQ(second.overlap_ns, 200);
  EXPECT_EQ(sut.same_stream_overlaps.count, 0u);
}

TEST(TraceAnalysis, CountsEveryOverlappingPair) {
  const Trace trace = parse_ok("1 0 1 0 100 a\n2 0 1 10 100 b\n3 0 1 20 100 c\n");

  const Report sut = analyze(trace, {.device = 0});

  EXPECT_EQ(sut.overlaps.count, 3u);
}

TEST(TraceAnalysis, KernelsThatTouchDoNotOverlap) {
  const Trace trace = parse_ok("1 0 1 0 100 a\n2 0 1 100 200 b\n1 0 1 200 300 a\n");

  const Report sut = analyze(trace, {.device = 0});

  EXPECT_EQ(sut.overlaps.count, 0u);
}

TEST(TraceAnalysis, OverlapsOnOtherDevicesDoNotCount) {
  const Trace trace = parse_ok("1 0 1 0 100 a\n2 1 1 0 100 b\n");

  EXPECT_EQ(analyze(trace, {.device = 0}).overlaps.count, 0u);
  EXPECT_EQ(analyze(trace, {.device = 1}).overlaps.count, 0u);
}

TEST(TraceAnalysis, OverlapsOutsideTheWindowDoNotCount) {
  const Trace trace = parse_ok("1 0 1 0 100 a\n2 0 1 50 200 b\n");

  const Report sut = analyze(trace, {.device = 0, .from_ns = 100, .to_ns = 200});

  EXPECT_EQ(sut.overlaps.count, 0u);
}

TEST(TraceAnalysis, OverlapTimeIsClippedToTheWindow) {
  const Trace trace = parse_ok("1 0 1 0 100 a\n2 0 1 50 200 b\n");

  const Report sut = analyze(trace, {.device = 0, .from_ns = 80, .to_ns = 200});

  EXPECT_EQ(sut.overlaps.count, 1u);
  ASSERT_EQ(sut.overlaps.examples.size(), 1u);
  EXPECT_EQ(sut.overlaps.examples[0].overlap_ns, 20);
}

TEST(TraceAnalysis, ReportsSameStreamOverlapSeparately) {
  const Trace trace = parse_ok("1 0 5 0 100 a\n1 0 5 90 150 b\n");

  const Report sut = analyze(trace, {.device = 0});

  EXPECT_EQ(sut.overlaps.count, 0u);
  EXPECT_EQ(sut.same_stream_overlaps.count, 1u);
  ASSERT_EQ(sut.same_stream_overlaps.examples.size(), 1u);
  EXPECT_EQ(sut.same_stream_overlaps.examples[0].overlap_ns, 10);
}

TEST(TraceAnalysis, KeepsOnlyTheFirstOverlapExamples) {
  std::string text = "1 0 1 0 1000 long\n";
  for (int i = 0; i < 10; ++i) {
    text += std::to_string(100 + i) + " 0 1 " + std::to_string(i * 10) + " " +
            std::to_string(i * 10 + 5) + " short\n";
  }
  const Trace trace = parse_ok(text);

  const Report sut = analyze(trace, {.device = 0, .max_overlap_examples = 3});

  EXPECT_EQ(sut.overlaps.count, 10u);
  ASSERT_EQ(sut.overlaps.examples.size(), 3u);
  EXPECT_EQ(sut.overlaps.examples[0].later.pid, 100);
  EXPECT_EQ(sut.overlaps.examples[2].later.pid, 102);
}

// ---------------------------------------------------------------- empty traces

TEST(TraceAnalysis, EmptyTraceReportsNothing) {
  const Trace trace = parse_ok("");

  const Report sut = analyze(trace, {.device = 0});

  EXPECT_EQ(sut.window, (Window{0, 0}));
  EXPECT_EQ(sut.kernels, 0u);
  EXPECT_EQ(sut.busy_ns, 0);
  EXPECT_DOUBLE_EQ(sut.busy_fraction, 0.0);
  EXPECT_TRUE(sut.pids.empty());
  EXPECT_TRUE(sut.tenants.empty());
  EXPECT_DOUBLE_EQ(sut.share_of(1), 0.0);
  EXPECT_EQ(sut.overlaps.count, 0u);
  EXPECT_TRUE(devices(trace).empty());
}

TEST(TraceAnalysis, EmptyTraceKeepsAnExplicitWindow) {
  const Report sut = analyze(Trace{}, {.device = 0, .from_ns = 100, .to_ns = 200});

  EXPECT_EQ(sut.window, (Window{100, 200}));
  EXPECT_DOUBLE_EQ(sut.busy_fraction, 0.0);
}

// ---------------------------------------------------------------- output

TEST(TraceOutput, JsonEscapesNames) {
  // Kernel names reach the JSON through overlap examples.
  const Trace trace = parse_ok("1 0 1 0 100 say\"hi\"\\\n2 0 1 50 60 b\n");
  const Report report = analyze(trace, {.device = 0, .tenants = {{"tab\there", {1}}}});
  std::ostringstream out;

  write_json(out, std::span(&report, 1));

  EXPECT_THAT(out.str(), HasSubstr(R"("name": "tab\u0009here")"));
  EXPECT_THAT(out.str(), HasSubstr(R"("name": "say\"hi\"\\")"));
  EXPECT_THAT(out.str(), HasSubstr(R"("busy_fraction": 1,)"));
}

TEST(TraceOutput, JsonOfNoReportsIsAnEmptyList) {
  std::ostringstream out;

  write_json(out, {});

  EXPECT_EQ(out.str(), "{\n  \"devices\": []\n}\n");
}

TEST(TraceOutput, TableListsTenantsPidsAndOverlaps) {
  const Trace trace = parse_ok("1 0 1 0 100 a\n2 0 1 50 200 b\n");
  const Report report = analyze(trace, {.device = 0, .tenants = {{"team", {1, 2}}}});
  std::ostringstream out;

  out << report;

  EXPECT_THAT(out.str(), HasSubstr("device 0: window [0, 200) ns"));
  EXPECT_THAT(out.str(), HasSubstr("team                 2     0.000000  100.00%"));
  EXPECT_THAT(out.str(), HasSubstr("    pid 2              1     0.000000   75.00%"));
  EXPECT_THAT(out.str(), HasSubstr("overlaps between processes: 1"));
}

}  // namespace
}  // namespace gpulimit::trace
