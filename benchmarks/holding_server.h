// A stand-in gpulimitd for the benchmarks of the launch gate's fast path:
// one board whose device 0 (the simulator's UUID) is held by tenant 1, and a
// thread that welcomes one client and keeps its connection open until the
// process ends. The client is then gated and holds the token.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/protocol/messages.h"
#include "gpulimit/shm/board_mapping.h"

struct HoldingServer {
  explicit HoldingServer(const std::string& path) {
    std::string error;
    board = gpulimit::shm::BoardMapping::create(4000, error);
    if (!board) {
      std::fprintf(stderr, "board: %s\n", error.c_str());
      std::abort();
    }
    gpulimit::shm::BoardDevice& device = board->writable()->devices[0];
    const unsigned char uuid[16] = {0xfa, 0x4e, 0xc0, 0xda, 0x00, 0x00, 0x40, 0x00,
                                    0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    std::memcpy(device.uuid, uuid, sizeof uuid);
    board->writable()->device_count.store(1);
    device.grant.store(1);
    device.token.store(gpulimit::shm::token_held(1));
    listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        listen(listener, 1) != 0)
      std::abort();
    thread = std::thread([this] { serve(); });
    thread.detach();  // blocked on the client's connection until the process ends
  }
  void serve() {
    const int client = accept(listener, nullptr, nullptr);
    gpulimit::protocol::Hello hello{};
    if (gpulimit::protocol::receive_message(client, &hello, sizeof hello, nullptr) <= 0) return;
    auto welcome = gpulimit::protocol::make<gpulimit::protocol::Welcome>();
    welcome.tenant_number = 1;
    welcome.device_count = hello.device_count;
    const int fd = board->read_only_descriptor();
    welcomed = gpulimit::protocol::send_message(client, &welcome, sizeof welcome, fd);
    close(fd);
    char byte;
    while (recv(client, &byte, 1, 0) > 0) {
    }
  }
  std::unique_ptr<gpulimit::shm::BoardMapping> board;
  int listener = -1;
  std::atomic<bool> welcomed{false};
  std::thread thread;
};
