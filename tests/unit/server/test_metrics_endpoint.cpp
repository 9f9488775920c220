// The Prometheus endpoint's handshake with the event loop, with the test as
// the loop: a scrape asks through refresh_fd() and gets what is published.
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "gpulimit/server/metrics/metrics_endpoint.h"

namespace gpulimit::server {
namespace {

using namespace std::chrono_literals;

// `fresh_wait`: how long a scrape waits for the loop (the test).
std::unique_ptr<MetricsEndpoint> start_on_any_port(std::chrono::milliseconds fresh_wait = 10s) {
  Result<std::unique_ptr<MetricsEndpoint>> started =
      MetricsEndpoint::start(MetricsAddress{"127.0.0.1", 0}, fresh_wait);
  EXPECT_TRUE(started) << (started ? "" : started.error());
  return started ? std::move(*started) : nullptr;
}

std::string scrape(const MetricsAddress& address) {
  httplib::Client http(address.host, address.port);
  http.set_read_timeout(10s);
  const httplib::Result response = http.Get("/metrics");
  return response && response->status == 200 ? response->body : "no answer";
}

bool refresh_asked(const MetricsEndpoint& endpoint, std::chrono::milliseconds timeout) {
  pollfd ready{endpoint.refresh_fd(), POLLIN, 0};
  return poll(&ready, 1, static_cast<int>(timeout.count())) == 1;
}

TEST(MetricsEndpoint, TakesAFreePortWhenAskedForPortZero) {
  const std::unique_ptr<MetricsEndpoint> sut = start_on_any_port();
  ASSERT_NE(sut, nullptr);

  EXPECT_NE(sut->address().port, 0);
  EXPECT_EQ(sut->address().host, "127.0.0.1");
}

TEST(MetricsEndpoint, AScrapeGetsTheExpositionPublishedAfterItAsked) {
  const std::unique_ptr<MetricsEndpoint> sut = start_on_any_port();
  ASSERT_NE(sut, nullptr);
  sut->publish("old 1\n");

  auto scraped = std::async(std::launch::async, [&] { return scrape(sut->address()); });
  ASSERT_TRUE(refresh_asked(*sut, 10s)) << "the scrape asks the loop";
  sut->acknowledge_refresh();
  sut->publish("fresh 2\n");

  EXPECT_EQ(scraped.get(), "fresh 2\n");
  EXPECT_FALSE(refresh_asked(*sut, 0ms)) << "acknowledged";
}

TEST(MetricsEndpoint, AScrapeTheLoopDoesNotAnswerGetsTheLastExposition) {
  const std::unique_ptr<MetricsEndpoint> sut = start_on_any_port(50ms);
  ASSERT_NE(sut, nullptr);
  sut->publish("last 3\n");

  const std::string scraped = scrape(sut->address());  // nobody acts on the refresh

  EXPECT_EQ(scraped, "last 3\n");
}

TEST(MetricsEndpoint, ASecondEndpointOnTheSamePortIsRefusedWithOneLine) {
  const std::unique_ptr<MetricsEndpoint> first = start_on_any_port();
  ASSERT_NE(first, nullptr);

  const Result<std::unique_ptr<MetricsEndpoint>> sut = MetricsEndpoint::start(first->address());

  ASSERT_FALSE(sut);
  EXPECT_NE(sut.error().find("Address already in use"), std::string::npos) << sut.error();
  EXPECT_NE(sut.error().find(first->address().text()), std::string::npos) << sut.error();
  EXPECT_EQ(sut.error().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace gpulimit::server
