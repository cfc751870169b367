// Prometheus metrics and health over a ZeroMQ STREAM socket; see metrics.h.
#include "daemon/server/metrics.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unordered_map>

#include "base/clock.h"
#include "base/log.h"

namespace htam::server {
namespace {

constexpr const char* kComponent = "metrics";
constexpr size_t kMaxRequestHead = 8192;  // a scrape's request head is a few hundred bytes

std::string Num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  // Whole numbers as integers (70, le="300"; never 7e+01), others as the shortest text that
  // reads back as the same double: le="0.005", not 0.0050000000000000001.
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Label values: backslash, quote and newline escaped (text format rules).
std::string Label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"')
      out += {'\\', c};
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// How a numeric line of the memory's status (daemon/memory StatusText) is exported: counts that
// only grow while htamd runs are counters (`_total`); a key with a unit abbreviation gets the
// base unit's name. Keys not listed are gauges named htam_memory_<key>.
struct MemoryField {
  const char* key;
  const char* metric;
  bool counter;
};
constexpr MemoryField kMemoryFields[] = {
    {"map_grows", "htam_memory_map_grows_total", true},
    {"retrieval_cache_hits", "htam_memory_retrieval_cache_hits_total", true},
    {"retrieval_cache_misses", "htam_memory_retrieval_cache_misses_total", true},
    {"group_commits", "htam_memory_group_commits_total", true},
    {"steps_recorded", "htam_memory_steps_recorded_total", true},
    {"last_snapshot_age_s", "htam_memory_last_snapshot_age_seconds", false},
};

// Metric names: [a-zA-Z0-9_] only.
std::string Name(std::string_view v) {
  std::string out;
  for (char c : v) out += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return out;
}

std::string HttpResponse(int code, const char* reason, const std::string& type,
                         const std::string& body) {
  std::ostringstream o;
  o << "HTTP/1.1 " << code << " " << reason << "\r\n"
    << "Content-Type: " << type << "\r\n"
    << "Content-Length: " << body.size() << "\r\n"
    << "Connection: close\r\n\r\n"
    << body;
  return o.str();
}

}  // namespace

Metrics::Metrics() : started_ms_(NowMs()) {}

const std::vector<double>& Metrics::LatencyBuckets() {
  static const std::vector<double> b{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                     0.5,    1,     2.5,    5,     10,   30,    60,   300};
  return b;
}

void Metrics::ObserveRequest(std::string_view type, double seconds, bool error) {
  const auto& bounds = LatencyBuckets();
  MutexLock l(&mu_);
  auto it = requests_.find(type);
  if (it == requests_.end()) {
    it = requests_.emplace(std::string(type), Histogram{}).first;
    it->second.buckets.assign(bounds.size(), 0);
  }
  Histogram& h = it->second;
  for (size_t i = 0; i < bounds.size(); ++i)
    if (seconds <= bounds[i]) {
      h.buckets[i]++;
      break;
    }
  h.count++;
  h.sum += seconds;
  if (error) h.errors++;
}

void Metrics::CountOutcome(std::string_view status, bool verified) {
  MutexLock l(&mu_);
  outcomes_[{std::string(status), verified}]++;
}

void Metrics::SetGauge(const std::string& name, double value, const std::string& help) {
  MutexLock l(&mu_);
  Gauge& g = gauges_[name];
  g.value = value;
  if (g.help.empty()) g.help = help;
}

void Metrics::SetMemoryStatusSource(std::function<std::string()> source) {
  MutexLock l(&mu_);
  memory_status_ = std::move(source);
}

std::string Metrics::Render() {
  std::function<std::string()> memory_status;
  std::ostringstream o;
  {
    MutexLock l(&mu_);
    memory_status = memory_status_;
    o << "# HELP htam_up Whether htamd runs (always 1 when scraped).\n# TYPE htam_up gauge\n"
      << "htam_up 1\n";
    o << "# HELP htam_ready Whether the memory and its indexes are loaded and requests are "
         "served.\n"
      << "# TYPE htam_ready gauge\nhtam_ready " << (ready() ? 1 : 0) << "\n";
    o << "# HELP htam_uptime_seconds Seconds since htamd started.\n"
      << "# TYPE htam_uptime_seconds gauge\n"
      << "htam_uptime_seconds " << Num((NowMs() - started_ms_) / 1000.0) << "\n";
    o << "# HELP htam_requests_total Requests answered, by message type.\n"
      << "# TYPE htam_requests_total counter\n";
    for (const auto& [type, h] : requests_)
      o << "htam_requests_total{type=\"" << Label(type) << "\"} " << h.count << "\n";
    o << "# HELP htam_request_errors_total Requests answered with an Error, by message type.\n"
      << "# TYPE htam_request_errors_total counter\n";
    for (const auto& [type, h] : requests_)
      o << "htam_request_errors_total{type=\"" << Label(type) << "\"} " << h.errors << "\n";
    o << "# HELP htam_request_duration_seconds Time from a request's receipt to its reply "
         "(Submit with wait: the whole evaluation), by message type.\n"
      << "# TYPE htam_request_duration_seconds histogram\n";
    const auto& bounds = LatencyBuckets();
    for (const auto& [type, h] : requests_) {
      uint64_t cum = 0;
      const std::string t = Label(type);
      for (size_t i = 0; i < bounds.size(); ++i) {
        cum += h.buckets[i];
        o << "htam_request_duration_seconds_bucket{type=\"" << t << "\",le=\"" << Num(bounds[i])
          << "\"} " << cum << "\n";
      }
      o << "htam_request_duration_seconds_bucket{type=\"" << t << "\",le=\"+Inf\"} " << h.count
        << "\n"
        << "htam_request_duration_seconds_sum{type=\"" << t << "\"} " << Num(h.sum) << "\n"
        << "htam_request_duration_seconds_count{type=\"" << t << "\"} " << h.count << "\n";
    }
    o << "# HELP htam_outcomes_total Step outcomes recorded, by class; verified=true: evaluated "
         "by htamd's workers, false: reported by a client (Record).\n"
      << "# TYPE htam_outcomes_total counter\n";
    for (const auto& [key, n] : outcomes_)
      o << "htam_outcomes_total{status=\"" << Label(key.first) << "\",verified=\""
        << (key.second ? "true" : "false") << "\"} " << n << "\n";
    for (const auto& [name, g] : gauges_)
      o << "# HELP " << name << " " << g.help << "\n# TYPE " << name << " gauge\n"
        << name << " " << Num(g.value) << "\n";
  }
  // The memory's status outside the lock: it takes the memory's own locks.
  if (memory_status) {
    std::istringstream in(memory_status());
    std::string line;
    while (std::getline(in, line)) {
      auto colon = line.find(':');
      if (line.empty() || line[0] == '#' || colon == std::string::npos) continue;
      std::string key = line.substr(0, colon), value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      char* end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      if (value.empty() || end == value.c_str() || *end != '\0') continue;  // not a number
      std::string name = "htam_memory_" + Name(key);
      bool counter = false;
      for (const auto& f : kMemoryFields) {
        if (key == f.key) {
          name = f.metric;
          counter = f.counter;
        }
      }
      o << "# HELP " << name << " Memory status field " << key
        << " (htam status, section memory).\n# TYPE " << name
        << (counter ? " counter\n" : " gauge\n") << name << " " << Num(v) << "\n";
    }
  }
  return o.str();
}

// ---------------------------------------------------------------- HTTP

std::string MetricsHttp::Respond(std::string_view head, Metrics* metrics) {
  // Request line: METHOD SP TARGET SP VERSION.
  auto eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos)
    return HttpResponse(400, "Bad Request", "text/plain; charset=utf-8", "bad request line\n");
  std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
  if (method != "GET" && method != "HEAD")
    return HttpResponse(405, "Method Not Allowed", "text/plain; charset=utf-8", "GET only\n");
  std::string response;
  if (target == "/metrics")
    response =
        HttpResponse(200, "OK", "text/plain; version=0.0.4; charset=utf-8", metrics->Render());
  else if (target == "/ready")
    response = metrics->ready()
                   ? HttpResponse(200, "OK", "text/plain; charset=utf-8", "ready\n")
                   : HttpResponse(503, "Service Unavailable", "text/plain; charset=utf-8",
                                  "not ready: loading the memory and its indexes\n");
  else if (target == "/healthz" || target == "/")
    response = HttpResponse(200, "OK", "text/plain; charset=utf-8", "ok\n");
  else
    response = HttpResponse(404, "Not Found", "text/plain; charset=utf-8",
                            "htamd serves /metrics, /ready and /healthz\n");
  if (method == "HEAD") response.resize(response.find("\r\n\r\n") + 4);
  return response;
}

Result<std::unique_ptr<MetricsHttp>> MetricsHttp::Start(const std::string& endpoint,
                                                        Metrics* metrics) {
  std::unique_ptr<MetricsHttp> h(new MetricsHttp());
  h->metrics_ = metrics;
  const std::string zep = endpoint.rfind("tcp://", 0) == 0 ? endpoint : "tcp://" + endpoint;
  try {
    h->socket_ = zmq::socket_t(h->context_, zmq::socket_type::stream);
    h->socket_.set(zmq::sockopt::linger, 0);
    h->socket_.bind(zep);
    h->endpoint_ = h->socket_.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("server.metrics_endpoint: cannot bind " + zep + ": " + e.what());
  }
  h->thread_ = std::thread([p = h.get()] { p->Loop(); });
  HTAM_LOG(kInfo, kComponent) << "metrics on http://" << h->endpoint_.substr(6)
                              << "/metrics (readiness /ready)";
  return h;
}

MetricsHttp::~MetricsHttp() {
  stop_.store(true);
  context_.shutdown();  // a call the thread is inside returns ETERM at once
  if (thread_.joinable()) thread_.join();
}

void MetricsHttp::Loop() {
  std::unordered_map<std::string, std::string> heads;  // connection id -> bytes so far
  // Answers never block: a peer whose connection is closing or full loses its answer (EAGAIN, or
  // EHOSTUNREACH once it is gone), and the loop goes on to the next one.
  auto send = [this](const std::string& id, const std::string& data) {
    try {
      if (socket_.send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
        (void)socket_.send(zmq::buffer(data), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) throw;
    }
  };
  // A STREAM message is two frames, the connection id (more) and its bytes. Frames are read one
  // at a time without blocking and paired by the `more` flag, so an interruption between the two
  // (EINTR) can never shift every later id by one frame.
  std::string id;
  bool have_id = false;
  while (!stop_.load()) {
    try {
      zmq::pollitem_t items[] = {{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 1, std::chrono::milliseconds(100));
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      for (zmq::message_t frame; !stop_.load() && socket_.recv(frame, zmq::recv_flags::dontwait);) {
        if (frame.more()) {  // the id frame
          id = frame.to_string();
          have_id = true;
          continue;
        }
        if (!have_id) continue;  // bytes without their id: drop them
        have_id = false;
        if (frame.size() == 0) {  // connect or disconnect notification
          heads.erase(id);
          continue;
        }
        std::string& head = heads[id];
        head.append(static_cast<const char*>(frame.data()), frame.size());
        if (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
          if (head.size() > kMaxRequestHead) {
            send(id, HttpResponse(431, "Request Header Fields Too Large",
                                  "text/plain; charset=utf-8", "request head too large\n"));
            send(id, "");  // an empty frame closes the connection
            heads.erase(id);
          }
          continue;
        }
        send(id, Respond(head, metrics_));
        send(id, "");
        heads.erase(id);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;  // the destructor shut the context down
      if (e.num() == EINTR) continue;
      HTAM_LOG(kWarn, kComponent) << "metrics endpoint: " << e.what();
    }
  }
}

}  // namespace htam::server
