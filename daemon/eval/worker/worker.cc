// htam-worker's daemon link: register, heartbeat, run jobs, reconnect. See worker.h.
#include "daemon/eval/worker/worker.h"

#include <unistd.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <zmq.hpp>

#include "base/clock.h"
#include "base/log.h"
#include "daemon/common/auth.h"
#include "daemon/config/sections.h"
#include "daemon/eval/scheduler/wire.h"

namespace htam::worker {
namespace {

using nlohmann::json;
constexpr const char* kComponent = "worker";
constexpr const char* kWakeEndpoint = "inproc://htam-worker-wake";

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// Results (JobResult buffers, wire.h) produced on the evaluator's threads, sent by the loop.
class Outbox {
 public:
  explicit Outbox(zmq::context_t* ctx) : push_(*ctx, zmq::socket_type::push) {
    push_.set(zmq::sockopt::linger, 0);
    push_.connect(kWakeEndpoint);
  }
  void Put(std::string m) {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(std::move(m));
    try {
      push_.send(zmq::str_buffer("w"), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // The loop also looks on its heartbeat tick.
    }
  }
  std::deque<std::string> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<std::string> out;
    out.swap(items_);
    return out;
  }

 private:
  std::mutex mu_;
  zmq::socket_t push_;  // guarded by mu_
  std::deque<std::string> items_;
};

// The CURVE keys of a worker that authenticates (worker.server_public_key_file and
// worker.key_file); both empty without.
struct CurveKeys {
  std::string server_key;
  auth::KeyPair mine;
};

Status ReadCurveKeys(const WorkerOptions& opt, CurveKeys* keys) {
  if (opt.server_public_key_file.empty()) return Status::OK();
  HTAM_ASSIGN_OR_RETURN(auto sk, auth::ReadKeyFile(opt.server_public_key_file));
  keys->server_key = sk.public_key;
  if (opt.key_file.empty())
    return Status::InvalidArgument("worker.server_public_key_file needs worker.key_file");
  HTAM_ASSIGN_OR_RETURN(keys->mine, auth::ReadKeyFile(opt.key_file));
  if (keys->mine.secret_key.empty())
    return Status::InvalidArgument(opt.key_file + " holds no secret key");
  return Status::OK();
}

// "register": this worker, its process and the devices its evaluator serves.
json RegisterMessage(const std::string& name, eval::Evaluator* ev) {
  std::random_device rd;
  const std::string instance = std::to_string((uint64_t(rd()) << 32) ^ rd());
  json devices = json::array();
  for (const auto& d : ev->Devices())
    devices.push_back({{"backend", d.backend},
                       {"arch", d.arch},
                       {"name", d.name},
                       {"memory_bytes", d.memory_bytes},
                       {"language", ev->BackendLanguage(d.backend)}});
  return json{{"type", "register"},   {"protocol", scheduler::kWorkerProtocol},
              {"name", name},         {"host", HostName()},
              {"pid", getpid()},      {"version", HTAM_VERSION},
              {"instance", instance}, {"devices", devices}};
}

// A "job" body from the daemon, handed to the evaluator (its result goes to `outbox`). True when
// submitted; else *refused is the result to send at once (an InfraError naming why).
bool SubmitJob(std::string_view body, const std::string& task_root, const std::string& name,
               eval::Evaluator* ev, Outbox* outbox, std::string* refused) {
  uint64_t id = 0;
  uint32_t attempt = 0;
  auto job = scheduler::JobFromWire(body, task_root, &id, &attempt);
  Status st = job.status();
  if (job.ok()) {
    HTAM_LOG(kDebug, kComponent) << "job " << id << " (attempt " << attempt << ")";
    st = ev->Submit(std::move(*job), [outbox, attempt](eval::EvalResult r) {
      outbox->Put(scheduler::ResultToWire(r, attempt));
    });
    if (st.ok()) return true;
  }
  // A buffer that fails the verifier names no job: its answer (job 0) is dropped by the daemon
  // as stale, and the job comes back when its attempt expires.
  HTAM_LOG(kWarn, kComponent) << "job " << id << ": " << st.ToString();
  eval::EvalResult r;
  r.job_id = id;
  r.status = fb::OutcomeStatus::InfraError;
  r.diagnostics = "worker " + name + " could not run the job: " + st.ToString();
  *refused = scheduler::ResultToWire(r, attempt);
  return false;
}

}  // namespace

WorkerOptions WorkerOptions::FromConfig(const Config& c) {
  const config::Worker w = config::Worker::From(c);
  WorkerOptions o;
  o.connect = w.connect;
  o.name = w.name;
  o.server_public_key_file = w.server_public_key_file;
  o.key_file = w.key_file;
  o.heartbeat_ms = static_cast<int>(std::max<int64_t>(10, w.heartbeat_ms));
  o.liveness = static_cast<int>(std::max<int64_t>(1, w.liveness));
  o.task_root = config::General::From(c).data_dir + "/worker-tasks";
  return o;
}

Status RunWorker(const WorkerOptions& opt, eval::Evaluator* ev, const std::atomic<bool>* stop) {
  CurveKeys keys;
  HTAM_RETURN_IF_ERROR(ReadCurveKeys(opt, &keys));
  const std::string name =
      opt.name.empty() ? HostName() + ":" + std::to_string(getpid()) : opt.name;
  const json hello = RegisterMessage(name, ev);
  const json& devices = hello["devices"];

  zmq::context_t ctx(1);
  zmq::socket_t wake(ctx, zmq::socket_type::pull);
  wake.bind(kWakeEndpoint);
  Outbox outbox(&ctx);
  std::unique_ptr<zmq::socket_t> sock;
  int heartbeat_ms = opt.heartbeat_ms, liveness = opt.liveness;
  int64_t last_heard = 0, last_sent = 0, last_tick = NowMs();
  bool registered = false;
  uint64_t jobs = 0;

  // [HTW2][type][body] (wire.h): a control message as JSON, a result as its buffer.
  auto send_raw = [&](const std::string& type, const std::string& body) {
    try {
      sock->send(zmq::buffer(std::string_view(scheduler::kWorkerProtocol)),
                 zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      sock->send(zmq::buffer(type), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      sock->send(zmq::buffer(body), zmq::send_flags::dontwait);
      last_sent = NowMs();
    } catch (const zmq::error_t& e) {
      HTAM_LOG(kDebug, kComponent) << "send: " << e.what();
    }
  };
  auto send = [&](const json& body) { send_raw(body.value("type", ""), body.dump()); };

  while (!stop->load()) {
    if (!sock) {
      try {
        sock = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
        sock->set(zmq::sockopt::linger, 0);
        if (!keys.server_key.empty()) {
          sock->set(zmq::sockopt::curve_serverkey, keys.server_key);
          sock->set(zmq::sockopt::curve_publickey, keys.mine.public_key);
          sock->set(zmq::sockopt::curve_secretkey, keys.mine.secret_key);
        }
        sock->connect(opt.connect);
      } catch (const zmq::error_t& e) {
        return Status::InvalidArgument("cannot connect to " + opt.connect + ": " + e.what());
      }
      registered = false;
      last_heard = NowMs();
      send(hello);
      HTAM_LOG(kInfo, kComponent) << name << ": connecting to " << opt.connect << " with "
                                  << devices.size() << " device(s)";
    }
    zmq::pollitem_t items[] = {{static_cast<void*>(*sock), 0, ZMQ_POLLIN, 0},
                               {static_cast<void*>(wake), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(heartbeat_ms));
      // This process was stopped or starved (SIGSTOP, a suspended VM, swap): the silence was
      // ours, not the daemon's. Read what waits, send a heartbeat, and give the daemon a full
      // liveness period to answer (with "reregister" if it dropped us) before reconnecting, so
      // that a job already in the socket is run and its result reaches the daemon.
      if (NowMs() - last_tick > int64_t(heartbeat_ms) * liveness) last_heard = NowMs();
      last_tick = NowMs();
      zmq::message_t w;
      while (wake.recv(w, zmq::recv_flags::dontwait)) {
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return Status::Internal(std::string("poll: ") + e.what());
    }
    for (int n = 0; n < 1000 && (items[0].revents & ZMQ_POLLIN); ++n) {
      std::vector<zmq::message_t> parts;
      try {
        zmq::message_t part;
        if (!sock->recv(part, zmq::recv_flags::dontwait)) break;
        bool more = part.more();
        parts.push_back(std::move(part));
        while (more) {
          zmq::message_t next;
          (void)sock->recv(next, zmq::recv_flags::none);
          more = next.more();
          if (parts.size() < 4) parts.push_back(std::move(next));
        }
      } catch (const zmq::error_t&) {
        break;
      }
      last_heard = NowMs();
      if (parts.size() != 3 || parts[0].to_string_view() != scheduler::kWorkerProtocol) continue;
      const std::string type = parts[1].to_string();
      if (type == "job") {
        std::string refused;
        if (SubmitJob(parts[2].to_string_view(), opt.task_root, name, ev, &outbox, &refused))
          ++jobs;
        if (!refused.empty()) send_raw("result", refused);
        continue;
      }
      json m = json::parse(parts[2].to_string_view(), nullptr, false);
      if (!m.is_object()) continue;
      if (type == "registered") {
        registered = true;
        heartbeat_ms = std::max(10, m.value("heartbeat_ms", heartbeat_ms));
        liveness = std::max(1, m.value("liveness", liveness));
        HTAM_LOG(kInfo, kComponent)
            << name << ": registered (heartbeat " << heartbeat_ms << " ms x " << liveness << ")";
      } else if (type == "reregister") {
        HTAM_LOG(kInfo, kComponent) << name << ": the daemon asks to register again";
        send(hello);
      } else if (type == "refused") {
        return Status::FailedPrecondition("the daemon refused this worker: " +
                                          m.value("message", std::string("?")));
      }
    }
    // After SIGTERM (a cluster ending the job, a pod evicted) the evaluator's processes may have
    // had the same signal: a result now may be the signal's, not the candidate's. None is sent;
    // "bye" below has the daemon requeue the job.
    if (!stop->load())
      for (auto& res : outbox.Take()) send_raw("result", res);
    const int64_t now = NowMs();
    if (now - last_sent >= heartbeat_ms) send(json{{"type", "heartbeat"}});
    if (now - last_heard > int64_t(heartbeat_ms) * liveness) {
      if (registered)
        HTAM_LOG(kWarn, kComponent)
            << name << ": the daemon is silent (" << now - last_heard << " ms); reconnecting";
      else  // never answered on this connection: nothing there, or a daemon of another protocol
        HTAM_LOG(kWarn, kComponent)
            << name << ": no answer to register from " << opt.connect << " in " << now - last_heard
            << " ms: is htamd running there, with worker.endpoint set, and "
            << "does it speak worker protocol " << scheduler::kWorkerProtocol
            << " (an older htamd does not answer it)? retrying";
      sock.reset();
    }
  }
  if (sock && registered) send(json{{"type", "bye"}});
  HTAM_LOG(kInfo, kComponent) << name << ": stopping after " << jobs << " job(s)";
  // Results still due from the evaluator are dropped; the daemon requeues those jobs.
  ev->Shutdown();
  sock.reset();
  return Status::OK();
}

}  // namespace htam::worker
