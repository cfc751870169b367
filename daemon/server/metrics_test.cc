// Metrics: the exposition text a Prometheus scrape reads, and the HTTP answers of the endpoint
// (over a real socket on loopback).
#include "daemon/server/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace htam::server {
namespace {

bool Contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// A connected TCP socket to 127.0.0.1:`port`, or -1.
int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// GET `path` on a fresh connection; the whole response, or "" when none came in `timeout_s`.
std::string Get(int port, const std::string& path, int timeout_s = 5) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  timeval tv{timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return "";
  }
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  close(fd);
  return got;
}

int PortOf(const MetricsHttp& http) {
  const std::string& ep = http.endpoint();  // tcp://127.0.0.1:PORT
  return std::stoi(ep.substr(ep.rfind(':') + 1));
}

TEST(MetricsTest, RequestsOutcomesGaugesAndMemoryLines) {
  Metrics m;
  m.ObserveRequest("NextStep", 0.003, false);
  m.ObserveRequest("NextStep", 0.2, true);
  m.CountOutcome("Ok", true);
  m.CountOutcome("CompileError", false);
  m.SetGauge("htam_evaluation_queue_depth", 3, "queued");
  m.SetMemoryStatusSource(
      [] {
        return "# memory\nstore_dir:/x\ndirections:12\nlast_snapshot_age_s:-1\n"
               "steps_recorded:70\nstore_file_bytes:1048576\n";
      });
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
  EXPECT_TRUE(Contains(t, "htam_memory_last_snapshot_age_seconds -1\n")) << t;
  // Counts that only grow are counters named _total; whole numbers never in exponent form.
  EXPECT_TRUE(Contains(t, "# TYPE htam_memory_steps_recorded_total counter\n")) << t;
  EXPECT_TRUE(Contains(t, "htam_memory_steps_recorded_total 70\n")) << t;
  EXPECT_TRUE(Contains(t, "htam_memory_store_file_bytes 1048576\n")) << t;
  EXPECT_TRUE(
      Contains(t, "htam_request_duration_seconds_bucket{type=\"NextStep\",le=\"300\"} 2\n"))
      << t;
  EXPECT_FALSE(Contains(t, "e+")) << t;
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

// Clients that go away at every point of an exchange (before sending, after half a head, right
// after the request without reading, with a reset) never stall the responder: the next scrape is
// answered, and the endpoint stops promptly with connections still open.
TEST(MetricsTest, ClientsThatLeaveEarlyNeverStallTheEndpoint) {
  Metrics m;
  auto http = MetricsHttp::Start("127.0.0.1:0", &m);
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  const int port = PortOf(**http);
  std::vector<int> left_open;
  for (int round = 0; round < 40; ++round) {
    const int silent = Connect(port);  // connects, says nothing, closes
    ASSERT_GE(silent, 0);
    close(silent);
    const int half = Connect(port);  // half a head, then gone
    ASSERT_GE(half, 0);
    ASSERT_EQ(write(half, "GET /metr", 9), 9);
    close(half);
    const int hasty = Connect(port);  // a whole request, closed before the answer is read
    ASSERT_GE(hasty, 0);
    const std::string req = "GET /metrics HTTP/1.1\r\n\r\n";
    ASSERT_EQ(write(hasty, req.data(), req.size()), static_cast<ssize_t>(req.size()));
    if (round % 2 == 0) {  // with a reset instead of an orderly close
      linger lg{1, 0};
      setsockopt(hasty, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    close(hasty);
    if (round % 10 == 0) left_open.push_back(Connect(port));  // idle until the end
    const std::string got = Get(port, round % 3 == 0 ? "/nope" : "/healthz");
    ASSERT_FALSE(got.empty()) << "no answer in round " << round;
    EXPECT_TRUE(got.rfind("HTTP/1.1 404", 0) == 0 || got.rfind("HTTP/1.1 200", 0) == 0) << got;
  }
  // Stopping with idle connections still open returns promptly.
  auto stopped = std::async(std::launch::async, [&] { http->reset(); });
  EXPECT_EQ(stopped.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "the endpoint did not stop";
  stopped.wait();
  for (int fd : left_open) close(fd);
}

}  // namespace
}  // namespace htam::server
