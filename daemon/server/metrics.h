// htamd's health and Prometheus metrics: a registry the server loop writes (requests by type
// with latency histograms, evaluation outcomes by class, queue depth, readiness) and a tiny
// HTTP responder (ZeroMQ STREAM socket, its own thread) serving /metrics in the text exposition
// format, /ready (200 once the memory and its indexes are loaded and the front socket is bound,
// else 503) and /healthz (200 while the process runs). Off unless server.metrics_endpoint is set.
//
// Thread-safety: Metrics is safe for concurrent use (one mutex, what it guards GUARDED_BY it and
// checked by clang -Wthread-safety; scrapes copy under it).
// MetricsHttp owns one thread; Start/destructor from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "base/status.h"
#include "base/thread_annotations.h"

namespace htam::server {

class Metrics {
 public:
  Metrics();

  // One answered request of `type` (Hello, NextStep, ...), `seconds` from receipt to reply.
  void ObserveRequest(std::string_view type, double seconds, bool error) EXCLUDES(mu_);
  // One finished evaluation (verified) or reported outcome (Record, unverified) of class `status`.
  void CountOutcome(std::string_view status, bool verified) EXCLUDES(mu_);
  // A gauge set by its owner (e.g. htam_evaluation_queue_depth); `help` is kept from the first set.
  void SetGauge(const std::string& name, double value, const std::string& help) EXCLUDES(mu_);
  // A count that only grows while htamd runs (its owner keeps the total); `name` ends in
  // `_total` and is exposed as a counter.
  void SetCounter(const std::string& name, double value, const std::string& help) EXCLUDES(mu_);
  void SetReady(bool ready) { ready_.store(ready); }
  bool ready() const { return ready_.load(); }
  // Called on every scrape (from the HTTP thread): the memory's INFO text, whose numeric
  // `key:value` lines become htam_memory_<key> gauges (store size, record counts, index
  // freshness). Set before the HTTP thread starts or while it runs; may return "".
  void SetMemoryStatusSource(std::function<std::string()> source) EXCLUDES(mu_);

  // The text exposition format (version 0.0.4).
  std::string Render() EXCLUDES(mu_);

  // Upper bounds (seconds) of the latency histogram buckets (+Inf is implicit).
  static const std::vector<double>& LatencyBuckets();

 private:
  struct Histogram {
    std::vector<uint64_t> buckets;  // cumulative at render time; per-bucket here
    uint64_t count = 0, errors = 0;
    double sum = 0;
  };
  struct Gauge {
    double value = 0;
    std::string help;
    bool counter = false;
  };
  Mutex mu_;
  std::map<std::string, Histogram, std::less<>> requests_ GUARDED_BY(mu_);
  std::map<std::pair<std::string, bool>, uint64_t> outcomes_ GUARDED_BY(mu_);
  std::map<std::string, Gauge> gauges_ GUARDED_BY(mu_);
  std::function<std::string()> memory_status_ GUARDED_BY(mu_);
  std::atomic<bool> ready_{false};
  const int64_t started_ms_;
};

// Limits of the HTTP side (server.metrics_max_connections, server.metrics_header_timeout_ms).
struct MetricsHttpLimits {
  int max_connections = 64;      // more open connections are closed as they arrive
  int header_timeout_ms = 5000;  // a request head not complete by then: 408, connection closed
};

// The HTTP side. `endpoint` is host:port (a ZeroMQ tcp:// endpoint is built from it).
class MetricsHttp {
 public:
  static Result<std::unique_ptr<MetricsHttp>> Start(const std::string& endpoint, Metrics* metrics,
                                                    MetricsHttpLimits limits = {});
  ~MetricsHttp();
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;
  // The address actually bound (resolves port 0).
  const std::string& endpoint() const { return endpoint_; }

  // One HTTP response for a request head (tested without sockets): status line, headers, body.
  static std::string Respond(std::string_view request_head, Metrics* metrics);

 private:
  MetricsHttp() = default;
  void Loop();

  Metrics* metrics_ = nullptr;
  MetricsHttpLimits limits_;
  std::string endpoint_;
  zmq::context_t context_{1};
  zmq::socket_t socket_;  // ZMQ_STREAM; used by the thread only once it runs
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace htam::server
