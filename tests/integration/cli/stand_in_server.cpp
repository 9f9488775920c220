// Stands in for gpulimitd in the CLI's tests, where what matters is how
// gpulimit starts a server and talks to it, not time-slicing. Takes
// gpulimitd's options (--socket PATH, --idle-exit-s N; others ignored),
// writes one line on how it was started to stdout (gpulimitd.log), then
// listens (the tests' one stand-in server, gpulimit/testing/stand_in_server.h)
// and answers each StatusRequest with a fixed status naming its own pid and
// socket. Exits on SIGTERM or after N seconds without a connection, removing
// its socket.
//
// STAND_IN_SERVER_MODE=never-listen: never listens (a server that hangs
// while starting); =exit: exits with status 3 at once.
#include "gpulimit/testing/stand_in_server.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

namespace {

volatile sig_atomic_t stop = 0;

void on_signal(int) {
  stop = 1;
}

// Descriptors 0 to 1023 that are open, comma-separated.
std::string open_descriptors() {
  std::string list;
  for (int fd = 0; fd < 1024; ++fd) {
    if (fcntl(fd, F_GETFD) < 0) continue;
    if (!list.empty()) list += ',';
    list += std::to_string(fd);
  }
  return list;
}

std::string variable_or_dash(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "-";
}

std::string status_json(const std::string& socket) {
  return R"({"server":{"pid":)" + std::to_string(getpid()) + R"(,"mode":"user","socket":")" +
         socket +
         R"(","quantum_us":20000,"uptime_s":1.5,"protocol":1},)"
         R"("devices":[{"board_index":0,"uuid":"GPU-fa4ec0da-0000-4000-8000-000000000000",)"
         R"("holder":null,"waiting":0}],"tenants":[]})";
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket;
  int idle_exit_s = 60;
  std::string args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    args += (i > 1 ? " " : "") + std::string(arg);
    if (arg == "--socket" && i + 1 < argc) {
      socket = argv[i + 1];
    } else if (arg == "--idle-exit-s" && i + 1 < argc) {
      idle_exit_s = std::atoi(argv[i + 1]);
    }
  }
  std::printf("started pid=%d ppid=%d sid=%d pgid=%d fds=%s preload=%s mask=%s args=%s\n", getpid(),
              getppid(), getsid(0), getpgrp(), open_descriptors().c_str(),
              variable_or_dash("LD_PRELOAD").c_str(),
              variable_or_dash("CUDA_VISIBLE_DEVICES").c_str(), args.c_str());
  std::fflush(stdout);
  if (socket.empty()) {
    std::fprintf(stderr, "stand-in server: no --socket\n");
    return 2;
  }

  const std::string mode = variable_or_dash("STAND_IN_SERVER_MODE");
  if (mode == "exit") return 3;
  if (mode == "never-listen") {
    for (;;)
      pause();
  }

  struct sigaction action {};
  action.sa_handler = on_signal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  std::optional<gpulimit::testing::StandInServer> server;
  try {
    server.emplace(socket);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "stand-in server: %s\n", error.what());
    return 1;
  }
  server->answer_status_with(status_json(socket));
  std::printf("listening\n");
  std::fflush(stdout);

  const auto idle = std::chrono::seconds(idle_exit_s);
  while (!stop && std::chrono::steady_clock::now() - server->last_connection() < idle)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  server->stop();
  std::printf("stopped\n");
  return 0;
}
