// forking_tenant: a CUDA program that forks, for the tests of what a child
// process does to its tenant's memory cap (tenant_processes_test.cpp). Run
// with libgpulimit.so preloaded on the simulated driver, linked to the
// driver's exported names.
//
//   forking_tenant SCENARIO [--hold SIZE] [--chunk SIZE] [--quick-exit] [-- PROGRAM ARGS...]
//
// The parent takes CUDA (cuInit, the primary context of device 0) and
// allocates --hold bytes in chunks of --chunk with cuMemAlloc, then:
//
//   idle-child       forks a child that touches no CUDA and returns from
//                    main (exit(), so atexit handlers and static destructors
//                    run; --quick-exit: _exit()), and waits for it.
//   lingering-child  forks a child that touches no CUDA and waits to be
//                    killed, prints "event=holding pid=P child_pid=C
//                    bytes=B", and waits to be killed itself.
//   cuda-child       forks a child that calls cuInit, cuMemAlloc and
//                    cuMemGetInfo and prints "role=child init=R alloc=R
//                    mem_get_info=R" (the CUresult codes), and waits for it.
//   exec-child       forks a child that execs PROGRAM ARGS (on the same
//                    stdout), and waits for it.
//   sibling          forks before taking CUDA, so that the child is a new
//                    process that takes CUDA itself. Parent and child then
//                    each allocate chunks until the driver refuses; the child
//                    tells the parent what it got and exits without freeing
//                    once the parent has looked (--hold is not used).
//
// Then the parent reports, as one key=value line on stdout:
//
//   scenario, held              what it holds (bytes)
//   child_bytes                 sibling only: what the child held
//   free_while_both             sibling only: cuMemGetInfo free while both held
//   child_status                the child's exit status, 128 + signal if killed
//   free_after_child            cuMemGetInfo free once the child has ended
//   more, more_error            what it could then allocate until refused
//
// Exit status 0 when every step ran, 1 when a driver call failed unexpectedly
// (one line on stderr), 2 for a wrong command line.
#include <cuda.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/byte_size.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

struct Options {
  std::string scenario;
  uint64_t hold = 0;
  uint64_t chunk = 64ull << 20;
  bool quick_exit = false;
  std::vector<char*> program;  // after "--", null-terminated
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "forking_tenant: %s\n", what.c_str());
  std::exit(kExitFailure);
}

void check(const char* call, CUresult result) {
  if (result != CUDA_SUCCESS) fail(std::string(call) + " failed: " + std::to_string(result));
}

void open_device() {
  check("cuInit", cuInit(0));
  CUdevice device = 0;
  check("cuDeviceGet", cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&context, device));
  check("cuCtxSetCurrent", cuCtxSetCurrent(context));
}

struct Allocation {
  uint64_t bytes = 0;
  CUresult error = CUDA_SUCCESS;  // what stopped it before the limit
};

// Chunks of `chunk` bytes until `limit` is reached or the driver refuses.
// Nothing is freed: what a process holds is what the tests count.
Allocation allocate(uint64_t limit, uint64_t chunk) {
  Allocation allocation;
  while (allocation.bytes < limit) {
    CUdeviceptr pointer = 0;
    allocation.error = cuMemAlloc(&pointer, chunk);
    if (allocation.error == CUDA_ERROR_OUT_OF_MEMORY) break;
    check("cuMemAlloc", allocation.error);
    allocation.bytes += chunk;
  }
  return allocation;
}

uint64_t free_memory() {
  size_t free = 0, total = 0;
  check("cuMemGetInfo", cuMemGetInfo(&free, &total));
  return free;
}

// Forks with stdio flushed, so that the child cannot print the parent's
// buffered output a second time.
pid_t fork_flushed() {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) fail(std::string("fork: ") + std::strerror(errno));
  return pid;
}

int wait_for(pid_t child) {
  int status = 0;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) fail(std::string("waitpid: ") + std::strerror(errno));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(kExitFailure);
    done += static_cast<size_t>(n);
  }
}

// Everything until the writer closes its end.
std::string read_all(int fd) {
  std::string text;
  char buffer[256];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return text;
    text.append(buffer, static_cast<size_t>(n));
  }
}

struct Pipe {
  Pipe() {
    if (pipe(fds) != 0) fail(std::string("pipe: ") + std::strerror(errno));
  }
  int fds[2] = {-1, -1};
  int read_end() const { return fds[0]; }
  int write_end() const { return fds[1]; }
};

void report(std::string line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::string pair(const char* key, uint64_t value) {
  return std::string(" ") + key + "=" + std::to_string(value);
}

// What the parent can still take once the child has ended.
std::string after_child(int child_status) {
  const uint64_t free = free_memory();
  const Allocation more = allocate(UINT64_MAX, 2ull << 20);
  return pair("child_status", static_cast<uint64_t>(child_status)) +
         pair("free_after_child", free) + pair("more", more.bytes) +
         pair("more_error", static_cast<uint64_t>(more.error));
}

int sibling(const Options& options) {
  Pipe done;  // child -> parent: its bytes, then EOF
  Pipe look;  // parent -> child: EOF once the parent has looked
  const pid_t child = fork_flushed();
  if (child == 0) {
    close(done.read_end());
    close(look.write_end());
    open_device();
    const Allocation mine = allocate(UINT64_MAX, options.chunk);
    write_all(done.write_end(), std::to_string(mine.bytes));
    close(done.write_end());
    read_all(look.read_end());
    return 0;  // exit() without freeing: the process's end gives it back
  }
  close(done.write_end());
  close(look.read_end());
  open_device();
  const Allocation mine = allocate(UINT64_MAX, options.chunk);
  const std::string child_bytes = read_all(done.read_end());
  const uint64_t free_while_both = free_memory();
  close(look.write_end());
  const int status = wait_for(child);
  report("workload=forking_tenant scenario=sibling" + pair("held", mine.bytes) +
         " child_bytes=" + (child_bytes.empty() ? "none" : child_bytes) +
         pair("free_while_both", free_while_both) + after_child(status));
  return 0;
}

int run(const Options& options) {
  if (options.scenario == "sibling") return sibling(options);

  open_device();
  const Allocation held = allocate(options.hold, options.chunk);
  if (held.bytes < options.hold)
    fail("--hold: the driver refused at " + std::to_string(held.bytes));

  const pid_t child = fork_flushed();
  if (child == 0) {
    if (options.scenario == "idle-child") {
      if (options.quick_exit) _exit(0);
      return 0;
    }
    if (options.scenario == "lingering-child") {
      alarm(60);  // never outlives a test that forgot it
      for (;;)
        pause();
    }
    if (options.scenario == "cuda-child") {
      const CUresult init = cuInit(0);
      CUdeviceptr pointer = 0;
      const CUresult alloc = cuMemAlloc(&pointer, options.chunk);
      size_t free = 0, total = 0;
      const CUresult info = cuMemGetInfo(&free, &total);
      report("workload=forking_tenant role=child" + pair("init", init) + pair("alloc", alloc) +
             pair("mem_get_info", info));
      return 0;
    }
    execv(options.program[0], options.program.data());
    std::fprintf(stderr, "forking_tenant: %s: %s\n", options.program[0], std::strerror(errno));
    _exit(127);
  }

  const std::string line =
      "workload=forking_tenant scenario=" + options.scenario + pair("held", held.bytes);
  if (options.scenario == "lingering-child") {
    report(line + " event=holding" + pair("pid", static_cast<uint64_t>(getpid())) +
           pair("child_pid", static_cast<uint64_t>(child)) + pair("bytes", held.bytes));
    for (;;)
      pause();
  }
  const int status = wait_for(child);
  report(line + after_child(status));
  return 0;
}

std::optional<Options> parse(int argc, char** argv) {
  Options options;
  if (argc < 2) return std::nullopt;
  options.scenario = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i)
        options.program.push_back(argv[i]);
      break;
    }
    if (arg == "--quick-exit") {
      options.quick_exit = true;
      continue;
    }
    if (i + 1 >= argc) return std::nullopt;
    const std::optional<uint64_t> size = gpulimit::parse_byte_size(argv[++i]);
    if (!size || *size == 0) return std::nullopt;
    if (arg == "--hold")
      options.hold = *size;
    else if (arg == "--chunk")
      options.chunk = *size;
    else
      return std::nullopt;
  }
  for (const char* known : {"idle-child", "lingering-child", "cuda-child", "sibling"})
    if (options.scenario == known)
      return options.program.empty() ? std::optional(options) : std::nullopt;
  if (options.scenario != "exec-child" || options.program.empty()) return std::nullopt;
  options.program.push_back(nullptr);
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Options> options = parse(argc, argv);
  if (!options) {
    std::fprintf(stderr,
                 "usage: forking_tenant idle-child|lingering-child|cuda-child|exec-child|sibling "
                 "[--hold SIZE] [--chunk SIZE] [--quick-exit] [-- PROGRAM ARGS...]\n");
    return kExitUsage;
  }
  return run(*options);
}
