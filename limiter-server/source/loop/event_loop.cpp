#include "gpulimit/server/loop/event_loop.h"

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace gpulimit::server {
namespace {

constexpr int kEventsPerWait = 64;

std::string describe_errno(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::create() {
  const int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return fail(describe_errno("epoll_create1"));
  return std::unique_ptr<EventLoop>(new EventLoop(fd));
}

EventLoop::~EventLoop() {
  ::close(epoll_fd_);
}

Result<EventLoop::WatchId> EventLoop::watch(int fd, uint32_t events, Handler handler) {
  const WatchId id = next_id_++;
  epoll_event event{};
  event.events = events;
  event.data.u64 = id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) < 0)
    return fail(describe_errno("epoll_ctl(ADD)"));
  watches_.emplace(id, Watch{fd, std::move(handler)});
  return id;
}

void EventLoop::change(WatchId id, uint32_t events) {
  const auto found = watches_.find(id);
  if (found == watches_.end()) return;
  epoll_event event{};
  event.events = events;
  event.data.u64 = id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, found->second.fd, &event);
}

void EventLoop::unwatch(WatchId id) {
  const auto found = watches_.find(id);
  if (found == watches_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, found->second.fd, nullptr);
  watches_.erase(found);
}

Result<void> EventLoop::run_once() {
  epoll_event events[kEventsPerWait];
  const int ready = epoll_wait(epoll_fd_, events, kEventsPerWait, -1);
  if (ready < 0) {
    if (errno == EINTR) return {};
    return fail(describe_errno("epoll_wait"));
  }
  for (int i = 0; i < ready; ++i) {
    // Looked up afresh for each event: an earlier handler may have removed it.
    const auto found = watches_.find(events[i].data.u64);
    if (found == watches_.end()) continue;
    // A copy: the handler may unwatch itself, destroying the stored one.
    const Handler handler = found->second.handler;
    handler(events[i].events);
  }
  return {};
}

TimeNs EventLoop::now() {
  timespec time{};
  clock_gettime(CLOCK_MONOTONIC, &time);
  return static_cast<TimeNs>(time.tv_sec) * 1'000'000'000 + time.tv_nsec;
}

Result<std::unique_ptr<DeadlineTimer>> DeadlineTimer::create() {
  const int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) return fail(describe_errno("timerfd_create"));
  return std::unique_ptr<DeadlineTimer>(new DeadlineTimer(fd));
}

DeadlineTimer::~DeadlineTimer() {
  ::close(fd_);
}

void DeadlineTimer::arm(TimeNs deadline) {
  if (deadline == armed_) return;
  armed_ = deadline;
  itimerspec spec{};
  if (deadline != kNever) {
    // 0 would disarm: a deadline at or before the clock's zero fires at 1 ns.
    const TimeNs at = deadline > 0 ? deadline : 1;
    spec.it_value.tv_sec = at / 1'000'000'000;
    spec.it_value.tv_nsec = at % 1'000'000'000;
  }
  timerfd_settime(fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
}

void DeadlineTimer::acknowledge() {
  uint64_t expirations;
  [[maybe_unused]] const ssize_t got = ::read(fd_, &expirations, sizeof expirations);
  armed_ = kNever;
}

}  // namespace gpulimit::server
