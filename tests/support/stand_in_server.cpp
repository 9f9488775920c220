#include "gpulimit/testing/stand_in_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/shm/futex.h"

namespace gpulimit::testing {

namespace protocol = gpulimit::protocol;
namespace shm = gpulimit::shm;

uint64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

void simulated_uuid(uint32_t index, unsigned char out[16]) {
  const unsigned char base[16] = {0xfa, 0x4e, 0xc0, 0xda, 0x00, 0x00, 0x40, 0x00,
                                  0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  std::memcpy(out, base, sizeof base);
  out[15] = static_cast<unsigned char>(index);
}

StandInServer::StandInServer(std::string socket_path, uint32_t devices, uint32_t quantum_us)
    : socket_path_(std::move(socket_path)) {
  std::string error;
  board_ = shm::BoardMapping::create(quantum_us, error);
  if (!board_) throw std::runtime_error("board: " + error);
  shm::BoardLayout& layout = *board_->writable();
  for (uint32_t i = 0; i < devices; ++i)
    simulated_uuid(i, layout.devices[i].uuid);
  layout.device_count.store(devices, std::memory_order_release);

  listener_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path_.c_str(), sizeof address.sun_path - 1);
  unlink(socket_path_.c_str());
  if (listener_ < 0 ||
      bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listener_, 64) != 0)
    throw std::runtime_error("cannot listen on " + socket_path_ + ": " + std::strerror(errno));
  if (pipe2(stop_pipe_, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  thread_ = std::thread([this] { serve(); });
}

StandInServer::~StandInServer() {
  stop();
  close(stop_pipe_[0]);
  close(stop_pipe_[1]);
}

uint32_t StandInServer::tenant_number(const std::string& tenant) {
  std::lock_guard<std::mutex> guard(mu_);
  auto at = std::find(tenants_.begin(), tenants_.end(), tenant);
  if (at == tenants_.end()) at = tenants_.insert(tenants_.end(), tenant);
  return static_cast<uint32_t>(at - tenants_.begin()) + 1;
}

void StandInServer::wake(uint32_t device) {
  shm::futex_wake_all(board_->writable()->devices[device].token);
}

void StandInServer::grant(uint32_t device, uint32_t tenant) {
  grant_unwoken(device, tenant);
  wake(device);
}

void StandInServer::revoke(uint32_t device) {
  revoke_unwoken(device);
  wake(device);
}

void StandInServer::grant_unwoken(uint32_t device, uint32_t tenant) {
  shm::BoardDevice& d = board_->writable()->devices[device];
  d.grant.fetch_add(1, std::memory_order_release);
  d.token.store(shm::token_held(tenant), std::memory_order_release);
}

void StandInServer::revoke_unwoken(uint32_t device) {
  shm::BoardDevice& d = board_->writable()->devices[device];
  d.token.store(shm::token_revoked(shm::token_holder(d.token.load())), std::memory_order_release);
}

void StandInServer::set_waiting(uint32_t device, uint32_t waiting) {
  board_->writable()->devices[device].waiting.store(waiting, std::memory_order_release);
  wake(device);
}

uint32_t StandInServer::grant_number(uint32_t device) const {
  return board_->layout().devices[device].grant.load();
}

uint32_t StandInServer::token(uint32_t device) const {
  return board_->layout().devices[device].token.load();
}

void StandInServer::refuse_with(std::string reason) {
  std::lock_guard<std::mutex> guard(mu_);
  refusal_ = std::move(reason);
}

void StandInServer::hang_up_on_hello(bool hang_up) {
  std::lock_guard<std::mutex> guard(mu_);
  hang_up_ = hang_up;
}

void StandInServer::answer_status_with(std::string json) {
  std::lock_guard<std::mutex> guard(mu_);
  status_json_ = std::move(json);
}

void StandInServer::stop() {
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  const char byte = 0;
  if (write(stop_pipe_[1], &byte, 1) != 1) std::abort();
  thread_.join();
  for (const auto& [fd, peer] : clients_)
    close(fd);
  clients_.clear();
  close(listener_);
  unlink(socket_path_.c_str());
  changed_.notify_all();
}

std::vector<Received> StandInServer::received() const {
  std::lock_guard<std::mutex> guard(mu_);
  return received_;
}

std::optional<Received> StandInServer::wait_for(const std::function<bool(const Received&)>& match,
                                                std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<Received> found;
  changed_.wait_for(lock, timeout, [&] {
    for (const Received& r : received_)
      if (match(r)) {
        found = r;
        return true;
      }
    return false;
  });
  return found;
}

bool StandInServer::wait_for_count(const std::function<bool(const Received&)>& match, size_t count,
                                   std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, timeout, [&] {
    return static_cast<size_t>(std::count_if(received_.begin(), received_.end(), match)) >= count;
  });
}

size_t StandInServer::connections() const {
  std::lock_guard<std::mutex> guard(mu_);
  return clients_.size();
}

std::chrono::steady_clock::time_point StandInServer::last_connection() const {
  std::lock_guard<std::mutex> guard(mu_);
  return last_connection_;
}

void StandInServer::serve() {
  for (;;) {
    std::vector<pollfd> fds{{stop_pipe_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
    std::vector<std::pair<int, pid_t>> clients;
    {
      std::lock_guard<std::mutex> guard(mu_);
      clients = clients_;
    }
    for (const auto& [fd, peer] : clients)
      fds.push_back({fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) continue;
    if (fds[0].revents) return;
    if (fds[1].revents & POLLIN) accept_one();
    for (size_t i = 2; i < fds.size(); ++i)
      if (fds[i].revents) read_one(fds[i].fd, clients[i - 2].second);
  }
}

void StandInServer::accept_one() {
  const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  protocol::PeerCredentials peer;
  protocol::peer_credentials(fd, peer);
  std::lock_guard<std::mutex> guard(mu_);
  clients_.emplace_back(fd, peer.pid);
  last_connection_ = std::chrono::steady_clock::now();
}

void StandInServer::read_one(int fd, pid_t peer) {
  alignas(protocol::Header) unsigned char buffer[1024];
  const ssize_t size = protocol::receive_message(fd, buffer, sizeof buffer, nullptr);
  if (size <= 0 || protocol::check(buffer, static_cast<size_t>(size)) != protocol::Problem::kNone) {
    // Gone (or speaking nonsense): the connection closes.
    std::lock_guard<std::mutex> guard(mu_);
    clients_.erase(std::remove_if(clients_.begin(), clients_.end(),
                                  [fd](const auto& client) { return client.first == fd; }),
                   clients_.end());
    close(fd);
    changed_.notify_all();
    return;
  }
  Received r;
  r.at_ns = monotonic_ns();
  r.peer = peer;
  protocol::Header header;
  std::memcpy(&header, buffer, sizeof header);
  r.type = header.type;
  bool close_after = false;
  switch (header.type) {
    case protocol::Type::kHello: {
      protocol::Hello hello;
      std::memcpy(&hello, buffer, sizeof hello);
      r.tenant.assign(hello.tenant, strnlen(hello.tenant, sizeof hello.tenant));
      r.claimed_pid = hello.claimed_pid;
      r.device_count = hello.device_count;
      r.sm_percent = hello.sm_percent;
      std::string refusal;
      bool hang_up = false;
      {
        std::lock_guard<std::mutex> guard(mu_);
        refusal = refusal_;
        hang_up = hang_up_;
      }
      if (hang_up) {
        close_after = true;
        break;
      }
      if (!refusal.empty()) {
        auto refused = protocol::make<protocol::Refused>();
        std::memcpy(refused.reason, refusal.c_str(),
                    std::min(refusal.size(), sizeof refused.reason - 1));
        protocol::send_message(fd, &refused, sizeof refused);
        close_after = true;  // as the server does after Refused
        break;
      }
      auto welcome = protocol::make<protocol::Welcome>();
      welcome.tenant_number = tenant_number(r.tenant);
      welcome.device_count = hello.device_count;
      const shm::BoardLayout& layout = board_->layout();
      for (uint32_t i = 0; i < hello.device_count && i < shm::kBoardDevices; ++i) {
        welcome.board_device[i] = UINT32_MAX;
        for (uint32_t d = 0; d < layout.device_count.load(); ++d)
          if (std::memcmp(layout.devices[d].uuid, hello.uuids[i], 16) == 0)
            welcome.board_device[i] = d;
      }
      const int board_fd = board_->read_only_descriptor();
      protocol::send_message(fd, &welcome, sizeof welcome, board_fd);
      close(board_fd);
      break;
    }
    case protocol::Type::kWant: {
      protocol::Want want;
      std::memcpy(&want, buffer, sizeof want);
      r.board_device = want.board_device;
      break;
    }
    case protocol::Type::kIdle: {
      protocol::Idle idle;
      std::memcpy(&idle, buffer, sizeof idle);
      r.board_device = idle.board_device;
      r.grant = idle.grant;
      break;
    }
    case protocol::Type::kAck: {
      protocol::Ack ack;
      std::memcpy(&ack, buffer, sizeof ack);
      r.board_device = ack.board_device;
      r.grant = ack.grant;
      break;
    }
    case protocol::Type::kStatusRequest: {
      std::string body;
      {
        std::lock_guard<std::mutex> guard(mu_);
        body = status_json_;
      }
      if (body.empty()) break;
      const protocol::Header reply_header{
          protocol::kMagic, protocol::kVersion, protocol::Type::kStatusReply,
          static_cast<uint32_t>(sizeof(protocol::Header) + body.size()), 0};
      std::string reply(reinterpret_cast<const char*>(&reply_header), sizeof reply_header);
      reply += body;
      protocol::send_message(fd, reply.data(), reply.size());
      break;
    }
    default:
      break;
  }
  std::lock_guard<std::mutex> guard(mu_);
  received_.push_back(r);
  if (close_after) {
    clients_.erase(std::remove_if(clients_.begin(), clients_.end(),
                                  [fd](const auto& client) { return client.first == fd; }),
                   clients_.end());
    close(fd);
  }
  changed_.notify_all();
}

}  // namespace gpulimit::testing
