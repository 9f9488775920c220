#include "gpulimit/server/metrics/metrics_address.h"

#include <algorithm>
#include <charconv>

namespace gpulimit::server {

std::string MetricsAddress::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<MetricsAddress> parse_metrics_address(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    std::string shown = text;  // one line, whatever was typed
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    return fail("metrics address '" + shown + "': " + why + " (expected HOST:PORT, e.g. " +
                kDefaultSystemMetricsAddress + ", or off)");
  };
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos) return bad("no port");
  MetricsAddress address;
  address.host = text.substr(0, colon);
  if (address.host.size() >= 2 && address.host.front() == '[' && address.host.back() == ']')
    address.host = address.host.substr(1, address.host.size() - 2);
  else if (address.host.find(':') != std::string::npos)
    return bad("an IPv6 address goes in brackets");
  if (address.host.empty()) return bad("no host");
  const bool printable = std::all_of(address.host.begin(), address.host.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == ':' || c == '%' || c == '_';
  });
  if (!printable) return bad("the host has characters no address has");
  const std::string port = text.substr(colon + 1);
  unsigned value = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || error != std::errc{} || end != port.data() + port.size() || value > 65535)
    return bad("the port is not a number from 0 to 65535");
  address.port = static_cast<uint16_t>(value);
  return address;
}

bool metrics_turned_off(const std::string& text) {
  return text.empty() || text == "off";
}

}  // namespace gpulimit::server
