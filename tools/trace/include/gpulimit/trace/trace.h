// gpulimit kernel traces: reading them and measuring who used the GPU.
//
// Trace format, version 1
// -----------------------
// Written by the simulated driver (tests/fakecuda, to the file named by
// FAKECUDA_TRACE) and by the CUPTI tracer on real GPUs. A text file with one
// line per executed kernel. Processes append to it concurrently with O_APPEND
// and one write() per line, so every line is whole but lines come in no
// particular order. Empty lines, lines of only spaces and tabs, and lines
// starting with '#' are ignored. Every other line has six fields separated by
// single spaces:
//
//   <pid> <device> <stream> <start_ns> <end_ns> <name>
//
//   pid       host process id, decimal, > 0
//   device    physical device index, decimal (not CUDA_VISIBLE_DEVICES-relative)
//   stream    stream id, decimal, unique within the process only
//   start_ns  CLOCK_MONOTONIC nanoseconds when the kernel started, decimal
//   end_ns    CLOCK_MONOTONIC nanoseconds when it ended, decimal, >= start_ns
//   name      the kernel's name, possibly mangled; no spaces or control characters
//
// Example:
//
//   # pid device stream start_ns end_ns name
//   4242 0 1 1000000 1250000 _Z4axpyfPfS_
//
// A reader rejects the first malformed line, naming its line number.
//
// Use:
//
//   auto trace = gpulimit::trace::load(path);       // check `trace.ok()` / trace.error()
//   auto report = gpulimit::trace::analyze(*trace, {.device = 0});
//   EXPECT_NEAR(report.share_of(pid), 0.5, 0.05) << report;
#pragma once

#include "gpulimit/trace/analysis.h"
#include "gpulimit/trace/parse.h"
#include "gpulimit/trace/records.h"
#include "gpulimit/trace/report_output.h"
