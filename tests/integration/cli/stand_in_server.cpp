// Stands in for gpulimitd in the CLI's tests, where what matters is how
// gpulimit starts a server and talks to it, not time-slicing. Takes
// gpulimitd's options (--socket PATH, --idle-exit-s N; others ignored),
// writes one line on how it was started to stdout (gpulimitd.log), then
// listens and answers each StatusRequest with a fixed status naming its own
// pid and socket. Exits on SIGTERM or after N seconds without a connection,
// removing its socket.
//
// STAND_IN_SERVER_MODE=never-listen: never listens (a server that hangs
// while starting); =exit: exits with status 3 at once.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/protocol/messages.h"

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

void answer(int connection, const std::string& socket) {
  std::vector<char> buffer(gpulimit::protocol::kMaxMessageSize);
  const ssize_t got =
      gpulimit::protocol::receive_message(connection, buffer.data(), buffer.size(), nullptr);
  if (got <= 0 || gpulimit::protocol::check(buffer.data(), static_cast<std::size_t>(got)) !=
                      gpulimit::protocol::Problem::kNone) {
    return;
  }
  gpulimit::protocol::Header header;
  std::memcpy(&header, buffer.data(), sizeof header);
  if (header.type != gpulimit::protocol::Type::kStatusRequest) return;
  const std::string body = status_json(socket);
  const gpulimit::protocol::Header reply_header{
      gpulimit::protocol::kMagic, gpulimit::protocol::kVersion,
      gpulimit::protocol::Type::kStatusReply,
      static_cast<uint32_t>(sizeof(gpulimit::protocol::Header) + body.size()), 0};
  std::string reply(reinterpret_cast<const char*>(&reply_header), sizeof reply_header);
  reply += body;
  gpulimit::protocol::send_message(connection, reply.data(), reply.size());
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

  const int listener = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket.c_str(), sizeof address.sun_path - 1);
  ::unlink(socket.c_str());
  if (::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener, 16) != 0) {
    std::fprintf(stderr, "stand-in server: %s: %s\n", socket.c_str(), std::strerror(errno));
    return 1;
  }
  std::printf("listening\n");
  std::fflush(stdout);

  while (!stop) {
    pollfd watch{listener, POLLIN, 0};
    const int ready = poll(&watch, 1, idle_exit_s * 1000);
    if (ready == 0) break;    // idle
    if (ready < 0) continue;  // a signal
    const int connection = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    answer(connection, socket);
    ::close(connection);
  }
  ::unlink(socket.c_str());
  std::printf("stopped\n");
  return 0;
}
