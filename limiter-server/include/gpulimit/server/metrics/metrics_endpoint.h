// gpulimitd's Prometheus endpoint: GET /metrics over HTTP (cpp-httplib), on
// threads of its own so that a slow or stuck scraper never holds the event
// loop. The loop stays the only reader of the server's state:
//   1. a scrape asks for a fresh exposition through refresh_fd() (an
//      eventfd the loop watches) and waits for it a short while;
//   2. the loop renders one and publish()es it: a swap under a mutex held
//      for nothing else, so the loop never waits on an HTTP thread;
//   3. the scrape gets it, or, when the loop is busy past the wait, the last
//      one published.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "gpulimit/server/metrics/metrics_address.h"
#include "gpulimit/server/result.h"

namespace httplib {
class Server;
}

namespace gpulimit::server {

// How long a scrape waits for the loop before it takes the last exposition.
inline constexpr std::chrono::milliseconds kFreshExpositionWait{250};

class MetricsEndpoint {
 public:
  // Listens on `address` and serves; a scrape waits `fresh_wait` for the
  // loop. Fails with one line when the address cannot be listened on (in
  // use, not local, ...).
  static Result<std::unique_ptr<MetricsEndpoint>> start(
      const MetricsAddress& address, std::chrono::milliseconds fresh_wait = kFreshExpositionWait);
  // Stops serving and joins its threads.
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // Where it listens, with the port it took when asked for port 0.
  const MetricsAddress& address() const { return address_; }
  // Readable while a scrape waits for a fresh exposition; the loop calls
  // acknowledge_refresh() and then publish().
  int refresh_fd() const { return refresh_fd_; }
  void acknowledge_refresh();
  void publish(std::string exposition);

 private:
  MetricsEndpoint(MetricsAddress address, std::unique_ptr<httplib::Server> http, int refresh_fd,
                  std::chrono::milliseconds fresh_wait);
  // On an HTTP thread: a fresh exposition, or the last one.
  std::string exposition_for_scrape();

  MetricsAddress address_;
  std::unique_ptr<httplib::Server> http_;
  int refresh_fd_ = -1;
  std::chrono::milliseconds fresh_wait_;
  std::thread listener_;
  std::atomic<bool> listener_done_{false};  // its listen loop returned

  std::mutex mutex_;
  std::condition_variable published_;
  std::string exposition_;   // under mutex_
  uint64_t generation_ = 0;  // under mutex_; counts publish() calls
  bool stopping_ = false;    // under mutex_
};

}  // namespace gpulimit::server
