// Metrics: the exposition text a Prometheus scrape reads, and the HTTP answers of the endpoint
// (over a real socket on loopback).
#include "daemon/server/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace htam::server {
namespace {

bool Contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(MetricsTest, RequestsOutcomesGaugesAndMemoryLines) {
  Metrics m;
  m.ObserveRequest("NextStep", 0.003, false);
  m.ObserveRequest("NextStep", 0.2, true);
  m.CountOutcome("Ok", true);
  m.CountOutcome("CompileError", false);
  m.SetGauge("htam_evaluation_queue_depth", 3, "queued");
  m.SetMemoryStatusSource(
      [] { return "# memory\nstore_dir:/x\ndirections:12\nlast_snapshot_age_s:-1\n"; });
  const std::string t = m.Render();
  EXPECT_TRUE(Contains(t, "htam_requests_total{type=\"NextStep\"} 2\n")) << t;
  EXPECT_TRUE(Contains(t, "htam_request_errors_total{type=\"NextStep\"} 1\n")) << t;
  // Cumulative buckets: 0.003 falls in le=0.005, 0.2 in le=0.25.
  EXPECT_TRUE(
      Contains(t, "htam_request_duration_seconds_bucket{type=\"NextStep\",le=\"0.0025\"} 0\n"))
      << t;
  EXPECT_TRUE(
      Contains(t, "htam_request_duration_seconds_bucket{type=\"NextStep\",le=\"0.005\"} 1\n"))
      << t;
  EXPECT_TRUE(
      Contains(t, "htam_request_duration_seconds_bucket{type=\"NextStep\",le=\"+Inf\"} 2\n"))
      << t;
  EXPECT_TRUE(Contains(t, "htam_request_duration_seconds_count{type=\"NextStep\"} 2\n")) << t;
  EXPECT_TRUE(Contains(t, "htam_outcomes_total{status=\"Ok\",verified=\"true\"} 1\n")) << t;
  EXPECT_TRUE(Contains(t, "htam_outcomes_total{status=\"CompileError\",verified=\"false\"} 1\n"))
      << t;
  EXPECT_TRUE(Contains(t, "htam_evaluation_queue_depth 3\n")) << t;
  EXPECT_TRUE(Contains(t, "htam_memory_directions 12\n")) << t;
  EXPECT_TRUE(Contains(t, "htam_memory_last_snapshot_age_s -1\n")) << t;
  EXPECT_FALSE(Contains(t, "store_dir")) << "non-numeric status lines are not metrics";
  EXPECT_TRUE(Contains(t, "htam_ready 0\n"));
  m.SetReady(true);
  EXPECT_TRUE(Contains(m.Render(), "htam_ready 1\n"));
}

TEST(MetricsTest, HttpAnswers) {
  Metrics m;
  auto r = MetricsHttp::Respond("GET /ready HTTP/1.1\r\nHost: x\r\n\r\n", &m);
  EXPECT_EQ(r.rfind("HTTP/1.1 503", 0), 0u) << r;
  m.SetReady(true);
  r = MetricsHttp::Respond("GET /ready HTTP/1.1\r\n\r\n", &m);
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  r = MetricsHttp::Respond("GET /metrics?x=1 HTTP/1.1\r\n\r\n", &m);
  EXPECT_TRUE(Contains(r, "Content-Type: text/plain; version=0.0.4")) << r;
  EXPECT_TRUE(Contains(r, "htam_up 1")) << r;
  EXPECT_EQ(MetricsHttp::Respond("POST /metrics HTTP/1.1\r\n\r\n", &m).rfind("HTTP/1.1 405", 0),
            0u);
  EXPECT_EQ(MetricsHttp::Respond("GET /nope HTTP/1.1\r\n\r\n", &m).rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(MetricsHttp::Respond("garbage\r\n\r\n", &m).rfind("HTTP/1.1 400", 0), 0u);
}

TEST(MetricsTest, ServesOverTcp) {
  Metrics m;
  m.ObserveRequest("Hello", 0.001, false);
  auto http = MetricsHttp::Start("127.0.0.1:0", &m);
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  const std::string ep = (*http)->endpoint();  // tcp://127.0.0.1:PORT
  const int port = std::stoi(ep.substr(ep.rfind(':') + 1));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  // The request in two pieces: the responder waits for the end of the head.
  const std::string p1 = "GET /metrics HTTP/1.1\r\nHost: local", p2 = "host\r\n\r\n";
  ASSERT_EQ(write(fd, p1.data(), p1.size()), static_cast<ssize_t>(p1.size()));
  usleep(50000);
  ASSERT_EQ(write(fd, p2.data(), p2.size()), static_cast<ssize_t>(p2.size()));
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  close(fd);  // the server closed first: read() returned 0
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK", 0), 0u) << got;
  EXPECT_TRUE(Contains(got, "htam_requests_total{type=\"Hello\"} 1")) << got;
}

}  // namespace
}  // namespace htam::server
