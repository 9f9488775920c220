// epoll, one handler per watched descriptor. Single-threaded: handlers run
// on the thread that calls run_once(), one event at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>

#include "gpulimit/server/result.h"
#include "gpulimit/server/scheduling/scheduling_types.h"

namespace gpulimit::server {

class EventLoop {
 public:
  using Handler = std::function<void(uint32_t events)>;
  using WatchId = uint64_t;

  static Result<std::unique_ptr<EventLoop>> create();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Calls `handler` with the epoll events whenever `fd` is ready for
  // `events` (level-triggered). The descriptor stays the caller's.
  Result<WatchId> watch(int fd, uint32_t events, Handler handler);
  // Changes the events watched; 0 pauses the watch.
  void change(WatchId id, uint32_t events);
  // Stops watching. Safe from inside any handler, its own included: an event
  // of this watch already fetched is not delivered.
  void unwatch(WatchId id);

  // Waits until some descriptor is ready (or a signal interrupts), then runs
  // the handlers of what is ready.
  Result<void> run_once();

  // CLOCK_MONOTONIC, in nanoseconds.
  static TimeNs now();

 private:
  explicit EventLoop(int epoll_fd) : epoll_fd_(epoll_fd) {}
  struct Watch {
    int fd;
    Handler handler;
  };

  int epoll_fd_;
  WatchId next_id_ = 1;
  std::unordered_map<WatchId, Watch> watches_;
};

// A timerfd on CLOCK_MONOTONIC, armed for one absolute deadline at a time.
class DeadlineTimer {
 public:
  static Result<std::unique_ptr<DeadlineTimer>> create();
  ~DeadlineTimer();
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  int fd() const { return fd_; }
  // Fires at `deadline` (kNever: disarmed). A deadline already passed fires at once.
  void arm(TimeNs deadline);
  // Reads the expiry count, so the descriptor stops being readable.
  void acknowledge();

 private:
  explicit DeadlineTimer(int fd) : fd_(fd) {}
  int fd_;
  TimeNs armed_ = kNever;
};

}  // namespace gpulimit::server
