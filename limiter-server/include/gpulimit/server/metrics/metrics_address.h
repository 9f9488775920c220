// Where gpulimitd serves its Prometheus metrics: --metrics-address HOST:PORT.
#pragma once

#include <cstdint>
#include <string>

#include "gpulimit/server/result.h"

namespace gpulimit::server {

// System mode's default: loopback only (a scraper elsewhere needs an address
// chosen on purpose), on the port after dcgm-exporter's 9400.
inline constexpr const char* kDefaultSystemMetricsAddress = "127.0.0.1:9401";

struct MetricsAddress {
  std::string host;   // an IPv4 or IPv6 address, or a name such as localhost
  uint16_t port = 0;  // 0: any free port (the status then names the one taken)

  // "host:port", "[v6]:port" for an IPv6 address.
  std::string text() const;
  friend bool operator==(const MetricsAddress&, const MetricsAddress&) = default;
};

// "HOST:PORT" or "[IPV6]:PORT". Fails with one line naming the text.
Result<MetricsAddress> parse_metrics_address(const std::string& text);

// What --metrics-address takes to turn the metrics off: "" or "off".
bool metrics_turned_off(const std::string& text);

}  // namespace gpulimit::server
