// htam-bench daemon: round trips to a real htamd over loopback TCP with the C++ SDK. Fills a
// store with synthetic transition records (memory library), starts htamd on it, then measures
// next-step and record latency (p50, p99) and throughput with 1, 8 and 32 concurrent clients, and
// the size of one next-step answer; with ops "flood", one client's flood against another's
// latency and htamd's RSS. Prints one JSON line at the end (docs/benchmarks.md, section "daemon").
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "base/paths.h"
#include "base/process.h"
#include "daemon/config/config.h"
#include "daemon/memory/memory.h"
#include "daemon/server/codec.h"
#include "htam/client.h"
#include "htam/schema/protocol_generated.h"
#include "tools/bench/args.h"
#include "tools/bench/bench.h"

namespace {

using htam::bench::NowSeconds;
using htam::bench::Percentile;
namespace fs = std::filesystem;
namespace po = boost::program_options;

const char kUsage[] =
    "usage: htam-bench daemon [options]\n"
    "Fills a store, starts htamd on it over loopback TCP, and measures next-step and record\n"
    "round trips with each client count, then the size of one next-step answer. Prints one JSON\n"
    "line at the end.";

#define CHECK_OK(expr)                                                                            \
  do {                                                                                            \
    auto&& _r = (expr);                                                                           \
    if (!_r.ok()) {                                                                               \
      std::fprintf(stderr, "htam-bench daemon: %s: %s\n", #expr, _r.status().ToString().c_str()); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

template <typename T>
const htam::Status& StatusOf(const htam::Result<T>& r) {
  return r.status();
}

// The summary and the source of the k-th learned strategy: distinct words, so that summaries do
// not merge, and a source of the size of a real candidate (2.9 KB: the median of the world
// benchmark's kernels, 1.6-5.9 KB), stored as its example.
std::string LearnedSummary(size_t k) {
  static const char* const kVerb[] = {"vectorize", "tile",     "unroll",  "fuse",  "pipeline",
                                      "coalesce",  "prefetch", "swizzle", "split", "pack"};
  static const char* const kWhat[] = {
      "loads",          "stores",     "the reduction",    "the epilogue",   "shared memory",
      "the inner loop", "the K loop", "the warp shuffle", "register tiles", "the grid"};
  static const char* const kHow[] = {
      "float4 access", "cp.async", "two stages",    "warp tiles",        "a persistent grid",
      "bank padding",  "ldmatrix", "vector stores", "a block-wide scan", "tensor cores"};
  return std::string(kVerb[k % 10]) + " " + kWhat[(k / 10) % 10] + " with " + kHow[(k / 100) % 10] +
         " (block " + std::to_string(64 << (k % 4)) + ", variant " + std::to_string(k) + ")";
}

std::string LearnedSource(size_t k) {
  std::string s =
      "// learned example " + std::to_string(k) +
      "\n#include <htam/kernel_abi.h>\n#include <cuda_runtime.h>\n\n"
      "__global__ void relu_kernel(const float4* __restrict__ x, float4* __restrict__ y,"
      " long long n4) {\n";
  for (int line = 0; line < 24; ++line)
    s += "  for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += "
         "gridDim.x * blockDim.x) { /* " +
         std::to_string(line) + " */ }\n";
  s += "}\n\nHTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out,"
       " int nout, htam_stream stream) { return 0; }\n";
  return s;
}

// Fills the store through the memory library (the daemon is not running yet). `learned`: that
// many successful steps carry a new summary and a source, so the store holds up to that many
// learned strategies with verified examples (what an agent's Submit leaves), beside the seed's.
void Populate(const htam::Config& config, size_t want, size_t learned) {
  htam::memory::MemoryOptions o = htam::memory::MemoryOptions::FromConfig(config);
  o.sync_commits = false;  // bulk load; synced at close (the daemon then syncs every commit)
  auto opened = htam::memory::Memory::Open(o);
  CHECK_OK(opened);
  htam::memory::Memory& m = **opened;
  auto existing = m.ListTransitions(0, 1);
  CHECK_OK(existing);
  size_t have = existing->empty() ? 0 : existing->front().id;
  if (have >= want) {
    std::fprintf(stderr, "store already holds %zu records\n", have);
    return;
  }
  htam::fb::TaskT task;
  task.name = "bench_relu";
  task.category = "elementwise";
  task.description = "synthetic task of the daemon benchmark";
  task.flops = 1 << 20;
  task.bytes = 8 << 20;
  auto task_id = m.PutTask(task);
  CHECK_OK(task_id);
  auto dirs = m.ListDirections();
  CHECK_OK(dirs);
  std::mt19937_64 rng(7);
  const htam::fb::OutcomeStatus statuses[] = {
      htam::fb::OutcomeStatus::Ok, htam::fb::OutcomeStatus::Ok, htam::fb::OutcomeStatus::Ok,
      htam::fb::OutcomeStatus::CompileError, htam::fb::OutcomeStatus::Incorrect};
  double t0 = NowSeconds(), last = t0;
  size_t learned_made = 0;
  const size_t learn_every = learned ? std::max<size_t>(1, (want - have) / learned) : 1;
  while (have < want) {
    auto s = m.OpenSession(*task_id, "cuda", "sm_90", "bench", "synthetic", 0);
    CHECK_OK(s);
    std::vector<htam::memory::StepInput> batch;
    double speedup = 1, best = 1;
    for (size_t k = 0; k < 100 && have + k < want; ++k) {
      htam::memory::StepInput in;
      in.session_id = s->id;
      in.direction_id = (*dirs)[rng() % dirs->size()].id;
      in.status = statuses[rng() % 5];
      speedup *= 0.9 + static_cast<double>(rng() % 40) / 100.0;
      speedup = std::min(speedup, 500.0);  // below memory.max_speedup: a plausible walk
      // A step that teaches a strategy is a verified success: it beats the session's best.
      const bool teach = learned_made < learned && (have + k) % learn_every == 0;
      if (teach) {
        in.status = htam::fb::OutcomeStatus::Ok;
        speedup = std::max(speedup, best * 1.1);
        in.summary = LearnedSummary(learned_made);
        in.language = "cuda";
        in.source = LearnedSource(learned_made);
        ++learned_made;
      }
      in.speedup_after = in.status == htam::fb::OutcomeStatus::Ok ? speedup : 0;
      if (in.speedup_after > best) best = in.speedup_after;
      in.verified = true;
      in.state =
          htam::memory::StateInput{static_cast<htam::fb::Bottleneck>(rng() % 5), std::nullopt, ""};
      batch.push_back(std::move(in));
    }
    CHECK_OK(m.RecordSteps(batch));
    have += batch.size();
    if (NowSeconds() - last > 15) {
      std::fprintf(stderr, "  ... %zu / %zu records (%.0f s)\n", have, want, NowSeconds() - t0);
      last = NowSeconds();
    }
  }
  CHECK_OK(m.ListTransitions(0, 1));
  auto strategies = m.ListStrategies(htam::memory::StrategyFilter());
  CHECK_OK(strategies);
  std::fprintf(stderr, "store: %zu strategies (%zu learned steps asked for)\n", strategies->size(),
               learned);
  auto snap = m.SnapshotIndexes();
  if (!snap.ok()) std::fprintf(stderr, "snapshot: %s\n", snap.ToString().c_str());
  std::fprintf(stderr, "store filled: %zu records in %.1f s\n", have, NowSeconds() - t0);
}

struct PhaseResult {
  std::string op;
  int clients = 0;
  size_t requests = 0;
  double seconds = 0;
  double p50_ms = 0, p99_ms = 0, mean_ms = 0;
  double daemon_cpu_s = 0;  // user + system time htamd spent during the phase
  double rps() const { return seconds > 0 ? requests / seconds : 0; }
  // htamd's own CPU per request: what the clients' share of a shared machine does not blur.
  double daemon_cpu_us() const { return requests ? daemon_cpu_s * 1e6 / requests : 0; }
};

// User + system CPU seconds of process `pid` so far (/proc/PID/stat); 0 when unreadable.
double ProcessCpuSeconds(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return 0;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces
  unsigned long utime = 0, stime = 0;
  if (!p || std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                        &stime) != 2)
    return 0;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A client connected as `name` (with `identity_secret`, or a random one) with a session open on
// the bench task (aborts on failure).
std::pair<std::unique_ptr<htam::Client>, uint64_t> OpenBenchSession(
    const std::string& endpoint, const std::string& name, const std::string& identity_secret = "") {
  htam::ClientOptions o;
  o.endpoint = endpoint;
  o.client_name = name;
  o.identity_secret = identity_secret;
  auto c = htam::Client::Connect(o);
  CHECK_OK(c);
  htam::OpenSessionArgs open;
  open.task = "bench_relu";
  open.backend = "cuda";
  auto s = (*c)->OpenSession(open);
  CHECK_OK(s);
  return {std::move(*c), s->session->id};
}

PhaseResult RunPhase(const std::string& endpoint, const std::string& op, int clients,
                     double seconds, pid_t daemon) {
  std::vector<std::unique_ptr<htam::Client>> conns;
  std::vector<uint64_t> sessions, directions;
  for (int i = 0; i < clients; ++i) {
    auto [c, session] = OpenBenchSession(endpoint, "bench-" + std::to_string(i));
    sessions.push_back(session);
    auto step = c->NextStep(session);  // a direction for Record, and a warm-up
    CHECK_OK(step);
    directions.push_back(step->direction->id);
    conns.push_back(std::move(c));
  }
  std::atomic<bool> go{false}, stop{false};
  std::mutex mu;
  std::vector<double> all;
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      std::vector<double> lat;
      lat.reserve(100000);
      while (!go) std::this_thread::yield();
      uint64_t k = 0;
      while (!stop) {
        double a = NowSeconds();
        if (op == "next_step") {
          CHECK_OK(conns[i]->NextStep(sessions[i]));
        } else if (op == "hello") {
          CHECK_OK(conns[i]->Hello());
        } else {
          htam::RecordArgs r;
          r.session_id = sessions[i];
          r.direction_id = directions[i];
          r.summary = "";
          r.status = htam::fb::OutcomeStatus::Ok;
          r.speedup_after = 1.0f + static_cast<float>(k++ % 10) / 10.0f;
          CHECK_OK(conns[i]->Record(r));
        }
        lat.push_back((NowSeconds() - a) * 1e3);
      }
      std::lock_guard<std::mutex> lock(mu);
      all.insert(all.end(), lat.begin(), lat.end());
    });
  }
  // Warm-up outside the window is done by the Connect/OpenSession round trips above.
  const double cpu0 = ProcessCpuSeconds(daemon);
  double t0 = NowSeconds();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  PhaseResult r;
  r.daemon_cpu_s = ProcessCpuSeconds(daemon) - cpu0;
  r.op = op;
  r.clients = clients;
  r.seconds = NowSeconds() - t0;
  r.requests = all.size();
  double sum = 0;
  for (double v : all) sum += v;
  r.mean_ms = all.empty() ? 0 : sum / all.size();
  r.p50_ms = Percentile(all, 50);
  r.p99_ms = Percentile(all, 99);
  for (size_t i = 0; i < conns.size(); ++i) {
    (void)conns[i]->CloseSession(sessions[i]);
  }
  return r;
}

// Resident set size of `pid` in KiB (/proc/PID/status); 0 when unreadable.
long RssKb(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "r");
  if (!f) return 0;
  char line[256];
  long kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmRSS:", 6) == 0) kb = std::atol(line + 6);
  std::fclose(f);
  return kb;
}

// NextStep latencies (ms) of one client for `seconds`, or until *stop.
std::vector<double> NextStepLatencies(htam::Client& c, uint64_t session, double seconds,
                                      const std::atomic<bool>* keep_going = nullptr) {
  std::vector<double> lat;
  const double end = NowSeconds() + seconds;
  while (NowSeconds() < end || (keep_going && keep_going->load())) {
    double a = NowSeconds();
    CHECK_OK(c.NextStep(session));
    lat.push_back((NowSeconds() - a) * 1e3);
  }
  return lat;
}

// One client floods htamd with `n` NextStep requests as fast as its socket takes them and never
// reads a reply; meanwhile a second client's NextStep round trips are timed, beside the same
// client's round trips with no flood (the baseline, first). htamd's RSS before, at its peak and
// `settle_s` after the flooder leaves.
void FloodPhase(const std::string& endpoint, pid_t daemon, size_t n, double seconds,
                double settle_s, nlohmann::json* out) {
  auto [c, session] = OpenBenchSession(endpoint, "bench-victim");
  CHECK_OK(c->NextStep(session));
  std::vector<double> base = NextStepLatencies(*c, session, seconds);
  const long rss_before = RssKb(daemon);

  // The flooder asks NextStep of its own session (a session of another client's would be
  // refused at the owner check, which costs htamd less): its socket says Hello with the
  // identity that opened it.
  const std::string flooder_secret = "the flooding client's identity";
  const uint64_t flooder_session =
      OpenBenchSession(endpoint, "bench-flooder", flooder_secret).second;
  zmq::context_t ctx(1);
  zmq::socket_t flood(ctx, zmq::socket_type::dealer);
  flood.set(zmq::sockopt::linger, 0);
  flood.set(zmq::sockopt::sndhwm, 0);  // the flooder's own queue is unbounded: all n go out
  flood.connect(endpoint);
  {
    htam::fb::HelloT hello;
    hello.client = "bench-flooder";
    hello.identity_secret.assign(flooder_secret.begin(), flooder_secret.end());
    htam::fb::EnvelopeT introduce;
    introduce.version = static_cast<uint16_t>(htam::fb::ProtocolVersion::Current);
    introduce.request_id = 2;
    introduce.body.Set(std::move(hello));
    flood.send(zmq::buffer(htam::server::Encode(introduce)), zmq::send_flags::none);
  }
  htam::fb::NextStepT next;
  next.session_id = flooder_session;
  htam::fb::EnvelopeT env;
  env.version = static_cast<uint16_t>(htam::fb::ProtocolVersion::Current);
  env.request_id = 1;
  env.body.Set(std::move(next));
  const std::string frame = htam::server::Encode(env);
  std::atomic<bool> flooding{true};
  std::atomic<long> rss_peak{rss_before};
  std::thread sender([&] {
    for (size_t i = 0; i < n; ++i) flood.send(zmq::buffer(frame), zmq::send_flags::none);
    // Until htamd has read them all: its busy counter and answers stop growing.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    flooding = false;
  });
  std::thread sampler([&] {
    while (flooding) {
      rss_peak = std::max(rss_peak.load(), RssKb(daemon));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const double t0 = NowSeconds();
  std::vector<double> during = NextStepLatencies(*c, session, seconds, &flooding);
  const double flood_s = NowSeconds() - t0;
  sender.join();
  sampler.join();
  flood.close();
  std::this_thread::sleep_for(std::chrono::duration<double>(settle_s));
  const long rss_after = RssKb(daemon);
  std::vector<double> after = NextStepLatencies(*c, session, seconds);
  auto status = c->ServerStatus("server");
  std::string busy = "?";
  if (status.ok()) {
    size_t at = status->find("busy_total: ");
    if (at != std::string::npos) busy = status->substr(at + 12, status->find('\n', at) - at - 12);
  }
  (void)c->CloseSession(session);
  std::fprintf(stderr,
               "flood of %zu NextStep from one client (%.1f s): other client next_step p50 %.3f "
               "ms p99 %.3f ms (%zu requests); baseline p50 %.3f ms p99 %.3f ms; after p50 %.3f "
               "ms p99 %.3f ms; htamd RSS %.1f -> peak %.1f -> %.1f MiB %.0f s after; busy "
               "refusals %s\n",
               n, flood_s, Percentile(during, 50), Percentile(during, 99), during.size(),
               Percentile(base, 50), Percentile(base, 99), Percentile(after, 50),
               Percentile(after, 99), rss_before / 1024.0, rss_peak / 1024.0, rss_after / 1024.0,
               settle_s, busy.c_str());
  (*out)["flood_requests"] = n;
  (*out)["flood_seconds"] = flood_s;
  (*out)["flood_victim_requests"] = during.size();
  (*out)["flood_victim_p50_ms"] = Percentile(during, 50);
  (*out)["flood_victim_p99_ms"] = Percentile(during, 99);
  (*out)["flood_baseline_p50_ms"] = Percentile(base, 50);
  (*out)["flood_baseline_p99_ms"] = Percentile(base, 99);
  (*out)["flood_after_p50_ms"] = Percentile(after, 50);
  (*out)["flood_after_p99_ms"] = Percentile(after, 99);
  (*out)["flood_rss_before_mib"] = rss_before / 1024.0;
  (*out)["flood_rss_peak_mib"] = rss_peak / 1024.0;
  (*out)["flood_rss_after_mib"] = rss_after / 1024.0;
  (*out)["flood_busy_refusals"] = busy;
}

// One session of `steps` Record steps through htamd: the store's growth per step, the write
// rate over the first and the last thousand steps, and the size of one Query of the session's
// records (bounded by server.reply_max_bytes, paged by its cursor).
void LongSessionPhase(const std::string& endpoint, const std::string& dir, size_t steps,
                      nlohmann::json* out) {
  auto [c, session] = OpenBenchSession(endpoint, "bench-long");
  auto step = c->NextStep(session);
  CHECK_OK(step);
  const uint64_t direction = step->direction->id;
  auto store_bytes = [&dir] {
    std::error_code ec;
    auto n = fs::file_size(fs::path(dir) / "store" / "data.mdb", ec);
    return ec ? 0.0 : static_cast<double>(n);
  };
  const double before = store_bytes();
  const size_t window = std::min<size_t>(1000, steps / 2);
  double first_rate = 0, last_rate = 0, t_window = NowSeconds();
  // At 1k, 10k, 20k, ... steps: the store's growth so far and the write rate over the window
  // of steps before.
  nlohmann::json marks = nlohmann::json::array();
  double t_mark = NowSeconds();
  auto is_mark = [&](size_t n) { return n == 1000 || (n % 10000 == 0 && n > 0) || n == steps; };
  for (size_t k = 0; k < steps; ++k) {
    if (is_mark(k + window)) t_mark = NowSeconds();
    htam::RecordArgs r;
    r.session_id = session;
    r.direction_id = direction;
    r.status = htam::fb::OutcomeStatus::Ok;
    r.speedup_after = 1.0f + static_cast<float>(k % 10) / 100.0f;
    r.median_us = 10;
    CHECK_OK(c->Record(r));
    if (k + 1 == window) first_rate = window / (NowSeconds() - t_window);
    if (k + 1 == steps - window) t_window = NowSeconds();
    if (is_mark(k + 1) && k + 1 >= window) {
      const double rate = window / (NowSeconds() - t_mark);
      const double mb = (store_bytes() - before) / 1e6;
      std::fprintf(stderr, "  at %zu steps: store +%.1f MB, %.0f writes/s over the last %zu\n",
                   k + 1, mb, rate, window);
      marks.push_back({{"steps", k + 1}, {"store_growth_mb", mb}, {"writes_per_s", rate}});
    }
  }
  last_rate = window / (NowSeconds() - t_window);
  const double growth = store_bytes() - before;
  htam::fb::QueryT q;
  q.kind = htam::fb::QueryKind::Transitions;
  q.session_id = session;
  q.limit = 0;  // the daemon's maximum
  auto page = c->Query(q);
  CHECK_OK(page);
  const size_t reply_bytes = htam::server::EncodeReply(1, std::move(*page)).size();
  (void)c->CloseSession(session);
  std::fprintf(stderr,
               "long session of %zu steps: store +%.1f MB (%.0f bytes/step), writes %.0f/s over "
               "the first %zu steps, %.0f/s over the last; one Query page %zu bytes\n",
               steps, growth / 1e6, growth / static_cast<double>(steps), first_rate, window,
               last_rate, reply_bytes);
  (*out)["long_session_steps"] = steps;
  (*out)["long_session_store_growth_mb"] = growth / 1e6;
  (*out)["long_session_first_writes_per_s"] = first_rate;
  (*out)["long_session_last_writes_per_s"] = last_rate;
  (*out)["long_session_query_reply_bytes"] = reply_bytes;
  (*out)["long_session_marks"] = marks;
}

// The size of one next-step answer in a fresh session: strategies it carries, its serialized
// reply (the envelope as htamd encodes it, without the transport's framing) and its
// prompt_context (characters the agent's prompt gains from the daemon's own text).
void AnswerSize(const std::string& endpoint, nlohmann::json* out) {
  auto [c, session] = OpenBenchSession(endpoint, "bench-size");
  auto step = c->NextStep(session);
  CHECK_OK(step);
  size_t examples = 0, example_chars = 0;
  for (const auto& h : step->strategies) {
    examples += h->example_source.empty() ? 0 : 1;
    example_chars += h->example_source.size();
  }
  const size_t strategies = step->strategies.size();
  const size_t prompt_chars = step->prompt_context.size();
  const size_t bytes = htam::server::EncodeReply(1, std::move(*step)).size();
  auto full = c->NextStep(session, {}, /*full=*/true);  // what NextStep.full asks
  CHECK_OK(full);
  const size_t full_strategies = full->strategies.size();
  const size_t full_bytes = htam::server::EncodeReply(1, std::move(*full)).size();
  (void)c->CloseSession(session);
  std::fprintf(stderr,
               "answer: %zu strategies (%zu with an example, %zu example chars), %zu bytes, "
               "prompt_context %zu chars; full answer: %zu strategies, %zu bytes\n",
               strategies, examples, example_chars, bytes, prompt_chars, full_strategies,
               full_bytes);
  (*out)["answer_full_strategies"] = full_strategies;
  (*out)["answer_full_bytes"] = full_bytes;
  (*out)["answer_strategies"] = strategies;
  (*out)["answer_examples"] = examples;
  (*out)["answer_example_chars"] = example_chars;
  (*out)["answer_bytes"] = bytes;
  (*out)["answer_prompt_context_chars"] = prompt_chars;
}

// Starts htamd (the daemon, on loopback TCP, its output in DIR/htamd.log) and waits until it
// answers Hello; its pid, or 0 when it did not start.
pid_t StartHtamd(const std::string& htamd, const std::string& dir, const std::string& endpoint,
                 const std::vector<std::string>& options) {
  std::vector<std::string> args = {htamd};
  args.insert(args.end(), options.begin(), options.end());
  auto started = htam::StartBackground(args, dir + "/htamd.log");
  if (!started.ok()) {
    std::fprintf(stderr, "htam-bench daemon: %s\n", started.status().message().c_str());
    return 0;
  }
  const pid_t pid = *started;
  bool ready = false;
  for (int i = 0; i < 6000 && !ready; ++i) {
    htam::ClientOptions o;
    o.endpoint = endpoint;
    o.connect_timeout = std::chrono::milliseconds(500);
    ready = htam::Client::Connect(o).ok();
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (waitpid(pid, nullptr, WNOHANG) == pid) break;
  }
  if (!ready) {
    std::fprintf(stderr, "htam-bench daemon: htamd (%s) did not start; see %s/htamd.log\n",
                 htamd.c_str(), dir.c_str());
    kill(pid, SIGKILL);
    return 0;
  }
  return pid;
}

// Restart after kill -9: `added` records reach the running daemon through Record, htamd is
// killed (-9) and started again; the time from its start to its first answered NextStep, and
// its RSS then. Returns the new daemon's pid.
pid_t RestartPhase(const std::string& htamd, const std::string& dir, const std::string& endpoint,
                   const std::vector<std::string>& options, pid_t pid, size_t added,
                   const std::string& label, nlohmann::json* out) {
  {
    auto [c, session] = OpenBenchSession(endpoint, "bench-restart");
    auto step = c->NextStep(session);
    CHECK_OK(step);
    for (size_t k = 0; k < added; ++k) {
      htam::RecordArgs r;
      r.session_id = session;
      r.direction_id = step->direction->id;
      r.status = htam::fb::OutcomeStatus::Ok;
      r.speedup_after = 1.0f + static_cast<float>(k % 10) / 100.0f;
      r.median_us = 10;
      CHECK_OK(c->Record(r));
    }
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // a snapshot the rule asks for lands
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  const double t0 = NowSeconds();
  pid = StartHtamd(htamd, dir, endpoint, options);
  if (pid <= 0) std::exit(1);
  auto [c, session] = OpenBenchSession(endpoint, "bench-restart");
  CHECK_OK(c->NextStep(session));
  const double seconds = NowSeconds() - t0;
  const long rss = RssKb(pid);
  std::fprintf(stderr,
               "restart after kill -9 (%s, %zu records added before the kill): first NextStep "
               "answered %.3f s after start, RSS %.1f MiB\n",
               label.c_str(), added, seconds, rss / 1024.0);
  (*out)["restart_" + label + "_s"] = seconds;
  (*out)["restart_" + label + "_rss_mib"] = rss / 1024.0;
  return pid;
}

// The restart phases: --added records then kill -9, with snapshots by time only (the baseline:
// the default interval is never reached, and no snapshot yet, as in a daemon's first minutes, so
// the restart replays every record), then from the same state with the record-count rule on.
// Returns the running htamd's pid, or <= 0 when one did not start.
pid_t RestartPhases(const std::string& htamd, const std::string& dir, const std::string& endpoint,
                    const std::vector<std::string>& base_args, pid_t pid, size_t added,
                    nlohmann::json* out) {
  std::vector<std::string> by_time = base_args;
  by_time.insert(by_time.end(), {"--memory.snapshot_every_records", "0"});
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  for (const char* kind : {"transitions", "strategies"})
    fs::remove(fs::path(dir) / "store" / (std::string(kind) + ".idx"));
  pid = StartHtamd(htamd, dir, endpoint, by_time);
  if (pid <= 0) return pid;
  pid = RestartPhase(htamd, dir, endpoint, by_time, pid, added, "by_time", out);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  for (const char* kind : {"transitions", "strategies"})
    fs::remove(fs::path(dir) / "store" / (std::string(kind) + ".idx"));
  pid = StartHtamd(htamd, dir, endpoint, base_args);
  if (pid <= 0) return pid;
  return RestartPhase(htamd, dir, endpoint, base_args, pid, added, "by_count", out);
}

// One phase of `op` with `clients` concurrent clients: a line on stderr, an entry in *phases and
// its figures in *out.
void ClientPhase(const std::string& endpoint, const std::string& op, int clients, double seconds,
                 pid_t pid, nlohmann::json* phases, nlohmann::json* out) {
  PhaseResult r = RunPhase(endpoint, op, clients, seconds, pid);
  std::fprintf(stderr,
               "%-9s clients=%-3d requests=%-7zu rps=%-8.0f p50=%.3f ms p99=%.3f ms "
               "htamd cpu=%.0f us/request\n",
               op.c_str(), r.clients, r.requests, r.rps(), r.p50_ms, r.p99_ms, r.daemon_cpu_us());
  phases->push_back({{"op", op},
                     {"clients", r.clients},
                     {"requests", r.requests},
                     {"rps", r.rps()},
                     {"p50_ms", r.p50_ms},
                     {"p99_ms", r.p99_ms},
                     {"mean_ms", r.mean_ms},
                     {"daemon_cpu_us", r.daemon_cpu_us()}});
  const std::string key = op + "_c" + std::to_string(clients);
  (*out)[key + "_p50_ms"] = r.p50_ms;
  (*out)[key + "_p99_ms"] = r.p99_ms;
  (*out)[key + "_rps"] = r.rps();
  (*out)[key + "_daemon_cpu_us"] = r.daemon_cpu_us();
}

// The decision's cost against the protocol's own round trip in the same run (issue 30's target:
// next_step p50 at most 2x hello's), per client count measured for both.
void NextStepOverHello(const std::vector<int64_t>& clients, nlohmann::json* out) {
  for (int64_t c : clients) {
    const std::string n = "next_step_c" + std::to_string(c) + "_p50_ms",
                      h = "hello_c" + std::to_string(c) + "_p50_ms";
    if (out->contains(n) && out->contains(h) && (*out)[h].get<double>() > 0) {
      const double ratio = (*out)[n].get<double>() / (*out)[h].get<double>();
      (*out)["next_step_over_hello_c" + std::to_string(c)] = ratio;
      std::fprintf(stderr, "next_step p50 / hello p50, %d client(s): %.2fx\n",
                   static_cast<int>(c), ratio);
    }
  }
}

}  // namespace

int RunDaemonBench(int argc, char** argv) {
  using htam::bench::Count;
  using htam::bench::CountList;
  Count records_n{100000}, learned_n{0}, seconds_n{5}, port_n{17800 + getpid() % 100},
      read_threads_n, flood_n{1000000}, settle_n{5}, steps_n{20000}, added_n{15000};
  CountList clients_n{{1, 8, 32}};
  std::string htamd = htam::FindExecutable("htamd");
  std::string dir, ops_list = "next_step,record";
  std::vector<std::string> options;
  po::options_description d;
  auto add = d.add_options();
  add("records", po::value(&records_n)->default_value(records_n, "100000")->value_name("N"),
      "transition records in the store before measuring");
  add("learned", po::value(&learned_n)->default_value(learned_n, "0")->value_name("N"),
      "of those records, N verified successes that each teach a new strategy with a ~2.9 KB "
      "example source (what agents' Submits leave; 0: the seed taxonomy's strategies alone)");
  add("clients", po::value(&clients_n)->default_value(clients_n, "1,8,32")->value_name("LIST"),
      "concurrent clients, one phase each");
  add("seconds", po::value(&seconds_n)->default_value(seconds_n, "5")->value_name("S"),
      "measuring time per phase and client count");
  add("port", po::value(&port_n)->default_value(port_n, "17800 + pid % 100")->value_name("P"),
      "loopback TCP port for htamd");
  add("dir", po::value(&dir)->value_name("DIR"),
      "data directory to use (default: a temp dir, removed at the end; an existing store there "
      "is reused when it already holds enough records)");
  add("htamd",
      po::value(&htamd)
          ->default_value(htamd, "the shipped one (base/paths.h)")
          ->value_name("PATH"),
      "the daemon binary");
  add("read-threads", po::value(&read_threads_n)->value_name("N"),
      "htamd's server.read_threads (default: the daemon's default)");
  add("option", po::value(&options)->composing()->value_name("KEY=VALUE"),
      "an htamd option for the daemon and the store fill, e.g. memory.top_k_strategies=64 "
      "(repeatable)");
  add("ops", po::value(&ops_list)->default_value(ops_list)->value_name("LIST"),
      "phases among hello,next_step,record,flood,long_session,restart; hello measures the protocol round trip alone "
      "(no memory work); long_session: one session of --steps records (store growth, write rate "
      "at its start and end); restart: --added records, kill -9, time to the first answer, with "
      "snapshots by time only and then also by count (memory.snapshot_every_records); flood: one client sends --flood NextStep requests without reading while "
      "another's next_step is timed (beside its baseline without the flood), and htamd's RSS");
  add("flood", po::value(&flood_n)->default_value(flood_n, "1000000")->value_name("N"),
      "requests of the flooding client in the flood phase (ops: flood)");
  add("steps", po::value(&steps_n)->default_value(steps_n, "20000")->value_name("N"),
      "steps of the one session of the long_session phase");
  add("added", po::value(&added_n)->default_value(added_n, "15000")->value_name("N"),
      "records added through htamd before each kill -9 of the restart phase");
  add("settle", po::value(&settle_n)->default_value(settle_n, "5")->value_name("S"),
      "seconds after the flood before htamd's RSS is read again");
  po::variables_map vm;
  const int exit_now = htam::bench::ParseArgs("htam-bench daemon", kUsage,
                                              std::vector<std::string>(argv, argv + argc), d,
                                              po::options_description(), &vm);
  if (exit_now >= 0) return exit_now;
  const size_t records = static_cast<size_t>(records_n.n);
  const size_t learned = static_cast<size_t>(learned_n.n);
  const std::vector<int64_t> clients = clients_n.v;
  const double seconds = static_cast<double>(seconds_n.n);
  const int port = static_cast<int>(port_n.n);
  // Checked by the daemon's own option table before anything is created.
  htam::Config config = htam::Config::Defaults();
  std::vector<std::string> htamd_options;  // --key value pairs for htamd's command line
  for (const std::string& kv : options) {
    const size_t eq = kv.find('=');
    htam::Status st = eq == std::string::npos ? htam::Status::InvalidArgument("expected KEY=VALUE")
                                              : config.Set(kv.substr(0, eq), kv.substr(eq + 1));
    if (!st.ok()) {
      std::fprintf(stderr, "htam-bench daemon: --option %s: %s\n", kv.c_str(),
                   st.ToString().c_str());
      return 2;
    }
    htamd_options.push_back("--" + kv.substr(0, eq));
    htamd_options.push_back(kv.substr(eq + 1));
  }
  bool temp = !vm.count("dir");
  if (temp) {
    char tmpl[] = "/tmp/htam-bench-daemon-XXXXXX";
    dir = mkdtemp(tmpl);
  }
  fs::create_directories(dir);
  chmod(dir.c_str(), 0755);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  const std::string read_threads =
      vm.count("read-threads") ? std::to_string(read_threads_n.n) : std::string();
  const std::vector<std::string> ops = htam::bench::SplitList(ops_list);

  (void)config.Set("general.data_dir", dir);
  std::fprintf(stderr, "filling the store in %s with %zu records...\n", dir.c_str(), records);
  Populate(config, records, learned);

  std::vector<std::string> base_args = {"--general.data_dir", dir, "--server.bind", endpoint,
                                        "--general.log_level", "warn"};
  if (!read_threads.empty()) {
    base_args.push_back("--server.read_threads");
    base_args.push_back(read_threads);
  }
  base_args.insert(base_args.end(), htamd_options.begin(), htamd_options.end());
  pid_t pid = StartHtamd(htamd, dir, endpoint, base_args);
  if (pid <= 0) return 1;

  nlohmann::json out;
  out["bench"] = "daemon";
  out["records"] = records;
  out["transport"] = "tcp loopback";
  out["seconds_per_phase"] = seconds;
  out["hardware_threads"] = std::thread::hardware_concurrency();
  nlohmann::json phases = nlohmann::json::array();
  out["read_threads"] = read_threads.empty() ? "default" : read_threads;
  out["learned"] = learned;
  out["options"] = options;
  for (const std::string& op : ops) {
    if (op == "flood") {
      FloodPhase(endpoint, pid, static_cast<size_t>(flood_n.n), seconds,
                 static_cast<double>(settle_n.n), &out);
      continue;
    }
    if (op == "restart") {
      pid = RestartPhases(htamd, dir, endpoint, base_args, pid, static_cast<size_t>(added_n.n),
                          &out);
      if (pid <= 0) return 1;
      continue;
    }
    if (op == "long_session") {
      LongSessionPhase(endpoint, dir, static_cast<size_t>(steps_n.n), &out);
      continue;
    }
    for (int64_t c : clients)
      ClientPhase(endpoint, op, static_cast<int>(c), seconds, pid, &phases, &out);
  }
  out["phases"] = phases;
  NextStepOverHello(clients, &out);
  AnswerSize(endpoint, &out);
  const int st = htam::StopBackground(pid, /*grace_ms=*/600000);
  out["daemon_exit"] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (temp) fs::remove_all(dir);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
