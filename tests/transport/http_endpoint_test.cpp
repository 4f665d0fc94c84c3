// The /metrics and health endpoint (shared/http/http_endpoint.h) on flashq's HTTP server: its
// three pages, 404 and 405 for anything else, and a malformed address refused.
#include "shared/http/http_endpoint.h"

#include <gtest/gtest.h>

#include <atomic>

#include "shared/error.h"
#include "tests/support/http_get.h"

namespace flashq::testing {
namespace {

TEST(HttpEndpoint, ServesMetricsHealthAndReadinessAndNothingElse) {
  std::atomic<bool> ready{false};
  HttpEndpoint endpoint("127.0.0.1:0",
                        HttpPages{[] { return std::string("flashq_up 1\n"); }, [&] { return ready.load(); }});
  ASSERT_GT(endpoint.port(), 0);
  EXPECT_EQ(http_get(endpoint.port(), "/healthz").status, 200);
  EXPECT_EQ(http_get(endpoint.port(), "/readyz").status, 503);
  ready = true;
  EXPECT_EQ(http_get(endpoint.port(), "/readyz").status, 200);
  const HttpResponse metrics = http_get(endpoint.port(), "/metrics?x=1");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.body, "flashq_up 1\n");
  EXPECT_EQ(http_get(endpoint.port(), "/other").status, 404);

  const int fd = connect_tcp(endpoint.port());
  ASSERT_GE(fd, 0);
  const std::string post = "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n";
  ASSERT_EQ(::send(fd, post.data(), post.size(), MSG_NOSIGNAL), static_cast<ssize_t>(post.size()));
  const std::string answer = read_until_closed(fd, std::chrono::milliseconds(2000));
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 405", 0), 0u) << answer;
}

TEST(HttpEndpoint, AMalformedAddressIsRefusedNamingIt) {
  for (const std::string address : {"no-port", "127.0.0.1:http", "127.0.0.1:99999", "127.0.0.1:80x"}) {
    try {
      HttpEndpoint endpoint(address, HttpPages{[] { return std::string(); }, [] { return true; }});
      ADD_FAILURE() << "listened on " << address;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << address;
      EXPECT_NE(std::string(e.what()).find(address), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace flashq::testing
