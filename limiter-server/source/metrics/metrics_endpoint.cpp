#include "gpulimit/server/metrics/metrics_endpoint.h"

#include <httplib.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpulimit/server/metrics/metrics_exposition.h"

namespace gpulimit::server {
namespace {

// Prometheus keeps its connection open between scrapes, and each open
// connection holds a thread: enough for a few scrapers, few for a daemon.
constexpr std::size_t kHttpThreads = 4;
// Short, so that connections that say nothing give their thread back soon
// and a stopping server does not wait long on them.
constexpr time_t kKeepAliveSeconds = 2;
constexpr time_t kIoTimeoutSeconds = 2;

// Without SO_REUSEPORT (cpp-httplib's default), so that a port another
// process listens on is refused rather than shared.
void listening_socket_options(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

// The threads it starts take every signal blocked: SIGTERM and SIGINT belong
// to the event loop's signalfd, which only sees them while no thread takes them.
class AllSignalsBlocked {
 public:
  AllSignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous_);
  }
  ~AllSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::start(
    const MetricsAddress& address, std::chrono::milliseconds fresh_wait) {
  auto http = std::make_unique<httplib::Server>();
  http->set_socket_options(listening_socket_options);
  http->new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
  http->set_keep_alive_timeout(kKeepAliveSeconds);
  http->set_read_timeout(kIoTimeoutSeconds);
  http->set_write_timeout(kIoTimeoutSeconds);

  MetricsAddress bound = address;
  errno = 0;
  if (address.port == 0) {
    const int port = http->bind_to_any_port(address.host);
    if (port > 0) bound.port = static_cast<uint16_t>(port);
  } else if (!http->bind_to_port(address.host, address.port)) {
    bound.port = 0;
  }
  if (bound.port == 0) {
    const int error = errno;
    return fail("cannot serve metrics on " + address.text() + ": " +
                (error != 0 ? std::strerror(error) : "no such local address") +
                " (choose another --metrics-address, or off)");
  }

  const int refresh_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (refresh_fd < 0) return fail(std::string("eventfd: ") + std::strerror(errno));
  std::unique_ptr<MetricsEndpoint> endpoint(
      new MetricsEndpoint(bound, std::move(http), refresh_fd, fresh_wait));
  MetricsEndpoint* self = endpoint.get();
  self->http_->Get("/metrics", [self](const httplib::Request&, httplib::Response& response) {
    response.set_content(self->exposition_for_scrape(), kMetricsContentType);
  });
  {
    const AllSignalsBlocked blocked;
    self->listener_ = std::thread([self] {
      self->http_->listen_after_bind();
      self->listener_done_ = true;
    });
  }
  // httplib's stop() does nothing before its loop runs: wait for that, so
  // that the destructor can always stop it.
  while (!self->http_->is_running() && !self->listener_done_)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return endpoint;
}

MetricsEndpoint::MetricsEndpoint(MetricsAddress address, std::unique_ptr<httplib::Server> http,
                                 int refresh_fd, std::chrono::milliseconds fresh_wait)
    : address_(std::move(address)),
      http_(std::move(http)),
      refresh_fd_(refresh_fd),
      fresh_wait_(fresh_wait) {}

MetricsEndpoint::~MetricsEndpoint() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  published_.notify_all();
  http_->stop();
  if (listener_.joinable()) listener_.join();
  ::close(refresh_fd_);
}

void MetricsEndpoint::acknowledge_refresh() {
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t got = ::read(refresh_fd_, &count, sizeof count);
}

void MetricsEndpoint::publish(std::string exposition) {
  {
    const std::lock_guard lock(mutex_);
    exposition_.swap(exposition);
    ++generation_;
  }
  published_.notify_all();
  // The previous exposition is freed here, outside the lock.
}

std::string MetricsEndpoint::exposition_for_scrape() {
  std::unique_lock lock(mutex_);
  const uint64_t asked_at = generation_;
  if (!stopping_) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(refresh_fd_, &one, sizeof one);
    published_.wait_for(lock, fresh_wait_, [&] { return generation_ != asked_at || stopping_; });
  }
  return exposition_;
}

}  // namespace gpulimit::server
