// --metrics-address: what it parses to, its defaults per mode, and refusals.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpulimit/server/daemon/command_line.h"
#include "gpulimit/server/metrics/metrics_address.h"

namespace gpulimit::server {
namespace {

std::variant<DaemonOptions, CommandLineExit> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "gpulimitd");
  std::vector<const char*> environment = {"XDG_RUNTIME_DIR=/run/user/1234", nullptr};
  return parse_command_line(static_cast<int>(args.size()), args.data(),
                            const_cast<char* const*>(environment.data()), 1234);
}

TEST(MetricsAddress, ParsesHostAndPort) {
  const Result<MetricsAddress> sut = parse_metrics_address("127.0.0.1:9401");

  ASSERT_TRUE(sut) << sut.error();
  EXPECT_EQ(sut->host, "127.0.0.1");
  EXPECT_EQ(sut->port, 9401);
  EXPECT_EQ(sut->text(), "127.0.0.1:9401");
}

TEST(MetricsAddress, TakesAnIpv6AddressInBrackets) {
  const Result<MetricsAddress> sut = parse_metrics_address("[::1]:0");

  ASSERT_TRUE(sut) << sut.error();
  EXPECT_EQ(sut->host, "::1");
  EXPECT_EQ(sut->port, 0);
  EXPECT_EQ(sut->text(), "[::1]:0");
}

TEST(MetricsAddress, RefusesWhatIsNotHostColonPort) {
  for (const char* text : {"9401", "127.0.0.1", ":9401", "127.0.0.1:", "127.0.0.1:http",
                           "127.0.0.1:65536", "127.0.0.1:-1", "::1:9401", "a b:1", "host\n:1"}) {
    const Result<MetricsAddress> sut = parse_metrics_address(text);

    ASSERT_FALSE(sut) << text;
    EXPECT_EQ(sut.error().find('\n'), std::string::npos) << "one line";
    EXPECT_NE(sut.error().find("metrics address"), std::string::npos) << sut.error();
  }
}

TEST(MetricsAddress, SystemModeServesMetricsOnLoopbackByDefault) {
  const auto sut = std::get<DaemonOptions>(parse({"--system"}));

  ASSERT_TRUE(sut.server.metrics);
  EXPECT_EQ(sut.server.metrics->text(), kDefaultSystemMetricsAddress);
  EXPECT_EQ(sut.server.metrics->host, "127.0.0.1");
}

TEST(MetricsAddress, PerUserModeServesNoMetricsUnlessAsked) {
  const auto without = std::get<DaemonOptions>(parse({}));
  const auto with = std::get<DaemonOptions>(parse({"--metrics-address", "127.0.0.1:9500"}));

  EXPECT_FALSE(without.server.metrics);
  ASSERT_TRUE(with.server.metrics);
  EXPECT_EQ(with.server.metrics->port, 9500);
}

TEST(MetricsAddress, OffOrEmptyTurnsTheSystemDefaultOff) {
  const auto off = std::get<DaemonOptions>(parse({"--system", "--metrics-address", "off"}));
  const auto empty = std::get<DaemonOptions>(parse({"--system", "--metrics-address", ""}));

  EXPECT_FALSE(off.server.metrics);
  EXPECT_FALSE(empty.server.metrics);
}

TEST(MetricsAddress, ABadAddressIsAUsageErrorOfOneLine) {
  const auto sut = std::get<CommandLineExit>(parse({"--metrics-address", "localhost"}));

  EXPECT_EQ(sut.status, 2);
  EXPECT_TRUE(sut.to_stderr);
  EXPECT_TRUE(sut.output.starts_with("gpulimitd: metrics address 'localhost'")) << sut.output;
  EXPECT_EQ(sut.output.find('\n'), sut.output.size() - 1) << sut.output;
}

}  // namespace
}  // namespace gpulimit::server
