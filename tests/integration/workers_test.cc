// Remote evaluation workers end to end: a real htamd with a worker endpoint (and no local
// devices), real htam-worker processes with the CPU backend on loopback, the C++ SDK as client.
// Registration, backend/arch matching, fair share, requeue when a worker is killed (-9) or goes
// silent mid-job (no duplicate result), daemon restart with queued work, busy answers, a worker of
// the older protocol (HTW1) told its version, and malformed worker messages.
#include <gtest/gtest.h>
#include <lmdb.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>
#include <zmq.hpp>

#include "base/file.h"
#include "daemon/eval/job_codec.h"
#include "tests/integration/daemon_harness.h"

namespace htam {
namespace {

using htam::testing::DaemonProcess;
using htam::testing::MakeTempDir;
using htam::testing::StatusValue;
using namespace std::chrono_literals;

const std::string kRelu = "cpu_relu";

// Correct, but each call sleeps: an evaluation lasts long enough to kill its worker mid-job.
std::string SlowRelu(int sleep_ms) {
  return R"(#include <htam/kernel_abi.h>
#include <chrono>
#include <thread>
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1) return 1;
  std::this_thread::sleep_for(std::chrono::milliseconds()" +
         std::to_string(sleep_ms) + R"());
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long n = htam_numel(&in[0]);
  for (long i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return 0;
}
)";
}

// One htam-worker child process (CPU backend), logging to a file in its own data directory.
class WorkerChild {
 public:
  WorkerChild(std::string dir, std::string name, std::string connect,
              std::vector<std::string> extra = {})
      : dir_(std::move(dir)),
        name_(std::move(name)),
        connect_(std::move(connect)),
        extra_(std::move(extra)) {}
  ~WorkerChild() { Kill(); }

  void Start() {
    std::vector<std::string> args = {
        HTAM_WORKER_PATH, "--general.data_dir", dir_, "--worker.connect", connect_, "--worker.name",
        name_, "--worker.heartbeat_ms", "200", "--worker.liveness", "5", "--eval.backends", "cpu",
        // A quick gate: these tests are about scheduling.
        "--eval.seeds", "1", "--eval.repetitions", "5", "--eval.warmup_reps", "1",
        "--eval.warmup_ms", "1", "--eval.input_sets", "1", "--eval.flush_max_mb", "1",
        "--general.log_level", "debug"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = htam::testing::SpawnLogged(std::move(args), dir_ + "/worker.log");
  }
  void Signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  int Terminate() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  const std::string& name() const { return name_; }
  std::string Log() const { return htam::ReadFileOrEmpty(dir_ + "/worker.log"); }

 private:
  std::string dir_, name_, connect_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
};

class WorkersTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("htam-workers"); }
  void TearDown() override {
    workers_.clear();
    if (HasFailure()) {
      std::cerr << "---- htamd log ----\n" << htam::ReadFileOrEmpty(dir_ + "/htamd.log") << "\n";
      for (auto& e : std::filesystem::directory_iterator(dir_))
        if (e.path().filename().string().rfind("w-", 0) == 0)
          std::cerr << "---- " << e.path().filename() << " ----\n"
                    << htam::ReadFileOrEmpty(e.path().string() + "/worker.log") << "\n";
    }
    std::filesystem::remove_all(dir_);
  }

  // A daemon with remote workers only (no local devices), on a private ipc:// worker endpoint.
  std::unique_ptr<DaemonProcess> StartDaemon(std::map<std::string, std::string> extra = {}) {
    std::map<std::string, std::string> o = {{"worker.endpoint", WorkerEndpoint()},
                                            {"worker.local", "false"},
                                            {"worker.heartbeat_ms", "200"},
                                            {"worker.liveness", "5"},
                                            {"general.log_level", "debug"}};
    for (auto& [k, v] : extra) o[k] = v;
    auto d = std::make_unique<DaemonProcess>(dir_, o);
    if (!d->Start()) return nullptr;
    return d;
  }
  virtual std::string WorkerEndpoint() { return "ipc://" + dir_ + "/workers.sock"; }

  // A client that rides out a daemon restart on the same endpoint (short timeout, many retries).
  static Result<std::unique_ptr<Client>> ClientSurvivingRestarts(const DaemonProcess& d) {
    ClientOptions o;
    o.endpoint = d.endpoint();
    o.timeout = 5s;
    o.retries = 10;
    return Client::Connect(o);
  }

  WorkerChild* AddWorker(const std::string& name, const std::string& connect = "",
                         std::vector<std::string> extra = {}) {
    std::string wdir = dir_ + "/w-" + name;
    std::filesystem::create_directories(wdir);
    chmod(wdir.c_str(), 0755);
    workers_.push_back(std::make_unique<WorkerChild>(
        wdir, name, connect.empty() ? WorkerEndpoint() : connect, std::move(extra)));
    workers_.back()->Start();
    return workers_.back().get();
  }

  // Waits (event-driven: asks the daemon's status) until `pred` holds on the workers section.
  bool WaitStatus(Client& c, const std::function<bool(const std::string&)>& pred,
                  std::chrono::seconds limit = 120s) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      auto s = c.ServerStatus("workers");
      if (s.ok() && pred(*s)) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  static int64_t Num(const std::string& status, const std::string& key) {
    std::string v = StatusValue(status, key);
    return v.empty() ? -1 : std::stoll(v);
  }
  static bool Has(const std::string& s, const std::string& needle) {
    return s.find(needle) != std::string::npos;
  }

  uint64_t OpenSession(Client& c, const std::string& arch = "") {
    OpenSessionArgs open;
    open.task = kRelu;
    open.arch = arch;
    auto info = c.OpenSession(open);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info->session->id : 0;
  }
  Result<uint64_t> Submit(Client& c, uint64_t sid, const std::string& source,
                          const std::string& summary = "candidate") {
    auto step = c.NextStep(sid);  // the direction the candidate follows (recorded with it)
    if (!step.ok()) return step.status();
    SubmitArgs s;
    s.session_id = sid;
    s.source = source;
    s.summary = summary;
    s.direction_id = step->direction->id;
    auto ack = c.Submit(s);
    if (!ack.ok()) return ack.status();
    return ack->job_id;
  }
  size_t Transitions(Client& c, uint64_t sid) {
    fb::QueryT q;
    q.kind = fb::QueryKind::Transitions;
    q.session_id = sid;
    auto tr = c.Query(q);
    EXPECT_TRUE(tr.ok());
    return tr.ok() ? tr->transitions.size() : 0;
  }

  std::string dir_;
  std::vector<std::unique_ptr<WorkerChild>> workers_;
};

std::string Reference() {
  return htam::ReadFileOrEmpty(std::string(HTAM_SOURCE_DIR) +
                               "/configs/tasks/cpu_relu/reference.cpp");
}

TEST_F(WorkersTest, WorkersRegisterAndJobsGoToAMatchingDevice) {
  auto d = StartDaemon({{"worker.wait_for_device_s", "2"}});
  ASSERT_NE(d, nullptr);
  auto c = d->Connect(120s);
  ASSERT_NE(c, nullptr);
  auto st = c->ServerStatus("workers");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(Num(*st, "workers"), 0);

  AddWorker("alpha");
  std::string status;
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) {
    status = s;
    return Num(s, "workers") == 1;
  })) << status;
  EXPECT_TRUE(Has(status, "worker_alpha: ")) << status;
  EXPECT_TRUE(Has(status, "backend=cpu")) << status;
  // The device's architecture, as the worker registered it.
  std::string line = StatusValue(status, "device_alpha_0");
  ASSERT_NE(line.find("arch="), std::string::npos) << status;
  std::string arch = line.substr(line.find("arch=") + 5);
  arch = arch.substr(0, arch.find(' '));
  ASSERT_FALSE(arch.empty());
  // Hello lists the remote worker's devices.
  auto hello = c->Hello();
  ASSERT_TRUE(hello.ok());
  EXPECT_NE(std::find(hello->backends.begin(), hello->backends.end(), "cpu"),
            hello->backends.end());

  // The CLI shows the fleet.
  {
    std::string cmd = std::string(HTAM_CLI_BIN) + " --json --connect " + d->endpoint() + " workers";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    EXPECT_EQ(pclose(p), 0) << out;
    EXPECT_TRUE(Has(out, "\"name\": \"alpha\"") || Has(out, "\"name\":\"alpha\"")) << out;
    EXPECT_TRUE(Has(out, "\"backend\": \"cpu\"") || Has(out, "\"backend\":\"cpu\"")) << out;
    // Numbers are JSON numbers, not strings.
    EXPECT_TRUE(Has(out, "\"workers\": 1") || Has(out, "\"workers\":1")) << out;
    EXPECT_FALSE(Has(out, "\"running\": \"") || Has(out, "\"running\":\"")) << out;
  }

  // A session that names the worker's architecture gets it.
  uint64_t sid = OpenSession(*c, arch);
  auto job = Submit(*c, sid, Reference());
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  auto r = c->Poll(*job, 120s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->done);
  EXPECT_EQ(r->status, fb::OutcomeStatus::Ok) << r->diagnostics;
  EXPECT_NE(r->transition_id, 0u);
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) {
    status = s;
    return Has(s, "worker_alpha: ") && Has(StatusValue(s, "worker_alpha"), "jobs=1 ");
  })) << status;

  // A session for an architecture no worker has waits, then fails after worker.wait_for_device_s.
  uint64_t other = OpenSession(*c, "sm_90");
  auto waiting = Submit(*c, other, Reference());
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) {
    status = s;
    return Num(s, "queue_cpu/sm_90") == 1;
  })) << status;
  auto late = c->Poll(*waiting, 120s);
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  ASSERT_TRUE(late->done);
  EXPECT_EQ(late->status, fb::OutcomeStatus::InfraError);
  EXPECT_TRUE(Has(late->diagnostics, "no worker serving backend 'cpu' arch 'sm_90'"))
      << late->diagnostics;

  // A worker that leaves (SIGTERM) says so and is gone from the status at once.
  EXPECT_EQ(workers_[0]->Terminate(), 0) << workers_[0]->Log();
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) {
    status = s;
    return Num(s, "workers") == 0;
  })) << status;
}

TEST_F(WorkersTest, SessionsShareDevicesFairly) {
  auto d = StartDaemon();
  ASSERT_NE(d, nullptr);
  auto c = d->Connect(120s);
  ASSERT_NE(c, nullptr);
  uint64_t a = OpenSession(*c), b = OpenSession(*c);
  // Queued before any worker is there: session a has four jobs ahead of session b's one.
  std::vector<uint64_t> a_jobs;
  for (int i = 0; i < 4; ++i) {
    auto j = Submit(*c, a, Reference(), "a" + std::to_string(i));
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    a_jobs.push_back(*j);
  }
  auto b_job = Submit(*c, b, Reference(), "b0");
  ASSERT_TRUE(b_job.ok()) << b_job.status().ToString();
  AddWorker("solo");
  std::vector<uint64_t> transition_of_a;
  for (uint64_t id : a_jobs) {
    auto r = c->Poll(id, 180s);
    ASSERT_TRUE(r.ok() && r->done) << (r.ok() ? "not done" : r.status().ToString());
    EXPECT_EQ(r->status, fb::OutcomeStatus::Ok) << r->diagnostics;
    transition_of_a.push_back(r->transition_id);
  }
  auto rb = c->Poll(*b_job, 180s);
  ASSERT_TRUE(rb.ok() && rb->done);
  // One device, sessions take turns: b's job ran second, not after all of a's.
  EXPECT_GT(rb->transition_id, transition_of_a[0]);
  EXPECT_LT(rb->transition_id, transition_of_a[1]);
}

// The CI case: several CPU workers on loopback TCP, one killed (-9) in the middle of a job.
class WorkersTcpTest : public WorkersTest {
 protected:
  std::string WorkerEndpoint() override { return "tcp://127.0.0.1:0"; }
};

TEST_F(WorkersTcpTest, AJobOfAKilledWorkerIsRequeuedAndRecordedOnce) {
  auto d = StartDaemon();
  ASSERT_NE(d, nullptr);
  auto c = d->Connect(120s);
  ASSERT_NE(c, nullptr);
  std::string status = *c->ServerStatus("workers");
  const std::string endpoint = StatusValue(status, "endpoint");
  ASSERT_EQ(endpoint.rfind("tcp://127.0.0.1:", 0), 0u) << status;
  AddWorker("one", endpoint);
  AddWorker("two", endpoint);
  AddWorker("three", endpoint);
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) {
    status = s;
    return Num(s, "workers") == 3;
  })) << status;
  uint64_t sid = OpenSession(*c);
  auto job = Submit(*c, sid, SlowRelu(100));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  // Which worker runs it?
  WorkerChild* victim = nullptr;
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) {
    status = s;
    for (auto& w : workers_)
      if (Has(StatusValue(s, "worker_" + w->name()), "running=1")) victim = w.get();
    return victim != nullptr;
  })) << status;
  victim->Signal(SIGKILL);
  auto r = c->Poll(*job, 180s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->done);
  EXPECT_EQ(r->status, fb::OutcomeStatus::Ok) << r->diagnostics;
  status = *c->ServerStatus("workers");
  EXPECT_EQ(Num(status, "workers_lost"), 1) << status;
  EXPECT_EQ(Num(status, "jobs_requeued"), 1) << status;
  EXPECT_EQ(Num(status, "workers"), 2) << status;
  EXPECT_EQ(Transitions(*c, sid), 1u);
}

TEST_F(WorkersTest, ASilentWorkerIsDroppedAndItsLateResultIsNotRecordedTwice) {
  auto d = StartDaemon();
  ASSERT_NE(d, nullptr);
  auto c = d->Connect(120s);
  ASSERT_NE(c, nullptr);
  WorkerChild* first = AddWorker("sleepy");
  std::string status;
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) { return Num(s, "workers") == 1; }));
  uint64_t sid = OpenSession(*c);
  auto job = Submit(*c, sid, SlowRelu(100));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) {
    status = s;
    return Has(StatusValue(s, "worker_sleepy"), "running=1");
  })) << status;
  // Frozen mid-job: no heartbeats. Its sandboxed evaluation goes on and finishes meanwhile.
  first->Signal(SIGSTOP);
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) {
    status = s;
    return Num(s, "workers_lost") == 1 && Num(s, "jobs_requeued") == 1;
  })) << status;
  AddWorker("fresh");
  auto r = c->Poll(*job, 180s);
  ASSERT_TRUE(r.ok() && r->done) << (r.ok() ? "not done" : r.status().ToString());
  EXPECT_EQ(r->status, fb::OutcomeStatus::Ok) << r->diagnostics;
  // Thawed: it sends the result of the attempt given up on, which is dropped; it registers again.
  first->Signal(SIGCONT);
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) {
    status = s;
    return Num(s, "stale_results_dropped") >= 1 && Num(s, "workers") == 2;
  })) << status;
  EXPECT_EQ(Transitions(*c, sid), 1u);
}

TEST_F(WorkersTest, QueuedWorkSurvivesADaemonRestartAndWorkersReconnect) {
  auto d = StartDaemon();
  ASSERT_NE(d, nullptr);
  auto client = ClientSurvivingRestarts(*d);
  ASSERT_TRUE(client.ok());
  Client& c = **client;
  AddWorker("steady");
  std::string status;
  ASSERT_TRUE(WaitStatus(c, [&](const std::string& s) { return Num(s, "workers") == 1; }));
  uint64_t sid = OpenSession(c);
  std::vector<uint64_t> jobs;
  for (int i = 0; i < 3; ++i) {
    auto j = Submit(c, sid, SlowRelu(50 + i), "slow " + std::to_string(i));
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    jobs.push_back(*j);
  }
  ASSERT_TRUE(WaitStatus(c, [&](const std::string& s) {
    status = s;
    return Num(s, "devices_busy") == 1 && Num(s, "queue_length") == 2;
  })) << status;
  d->Kill();  // kill -9, one job running and two queued
  d = StartDaemon();
  ASSERT_NE(d, nullptr) << htam::ReadFileOrEmpty(dir_ + "/htamd.log");
  // The worker finds the new daemon by itself; the three jobs run and each is recorded once.
  for (uint64_t id : jobs) {
    auto r = c.Poll(id, 180s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->done);
    EXPECT_EQ(r->status, fb::OutcomeStatus::Ok) << r->diagnostics;
  }
  status = *c.ServerStatus("workers");
  EXPECT_EQ(Num(status, "workers"), 1) << status;
  EXPECT_EQ(Num(status, "queue_length"), 0) << status;
  EXPECT_EQ(Transitions(c, sid), 3u);
  EXPECT_TRUE(Has(htam::ReadFileOrEmpty(dir_ + "/htamd.log"),
                  "3 job(s) queued before the restart will resume"));
}

// Rewrites every entry of a (closed) durable queue in the format of htamd before schema/job.fbs:
// one JSON object per job. Returns how many entries it rewrote.
size_t RewriteQueueAsOldJson(const std::string& queue_dir) {
  MDB_env* env = nullptr;
  size_t n = 0;
  if (mdb_env_create(&env) != 0) return 0;
  mdb_env_set_mapsize(env, size_t(1) << 30);
  MDB_txn* txn = nullptr;
  MDB_dbi dbi;
  MDB_cursor* cur = nullptr;
  if (mdb_env_open(env, queue_dir.c_str(), 0, 0644) == 0 &&
      mdb_txn_begin(env, nullptr, 0, &txn) == 0 && mdb_dbi_open(txn, nullptr, 0, &dbi) == 0 &&
      mdb_cursor_open(txn, dbi, &cur) == 0) {
    std::vector<std::pair<std::string, std::string>> rewritten;
    MDB_val k, v;
    for (int op = MDB_FIRST; mdb_cursor_get(cur, &k, &v, MDB_cursor_op(op)) == 0; op = MDB_NEXT) {
      auto spec = eval::UnpackJob(std::string_view(static_cast<const char*>(v.mv_data), v.mv_size),
                                  "queued job");
      if (!spec.ok()) continue;
      nlohmann::json old = {{"job_id", spec->job_id},   {"backend", spec->backend},
                            {"arch", spec->arch},       {"language", spec->language},
                            {"source", spec->source},   {"session_id", spec->session_id},
                            {"profile", spec->profile}, {"task_dir", spec->task_dir},
                            {"context", spec->context}};
      rewritten.emplace_back(std::string(static_cast<const char*>(k.mv_data), k.mv_size),
                             old.dump());
    }
    mdb_cursor_close(cur);
    for (auto& [key, value] : rewritten) {
      MDB_val kk{key.size(), key.data()}, vv{value.size(), value.data()};
      if (mdb_put(txn, dbi, &kk, &vv, 0) == 0) ++n;
    }
    if (mdb_txn_commit(txn) != 0) n = 0;
  } else if (txn) {
    mdb_txn_abort(txn);
  }
  mdb_env_close(env);
  return n;
}

// Jobs queued by an htamd of the JSON queue format (before schema/job.fbs) resume after the
// upgrade: the new daemon reads the old entries, dispatches them to a worker of the new protocol,
// and records each once.
TEST_F(WorkersTest, JobsQueuedBeforeTheUpgradeResume) {
  auto d = StartDaemon();
  ASSERT_NE(d, nullptr);
  auto client = ClientSurvivingRestarts(*d);
  ASSERT_TRUE(client.ok());
  Client& c = **client;
  uint64_t sid = OpenSession(c);
  std::vector<uint64_t> jobs;
  for (int i = 0; i < 2; ++i) {  // no worker yet: both wait in the durable queue
    auto j = Submit(c, sid, Reference(), "queued " + std::to_string(i));
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    jobs.push_back(*j);
  }
  d->Kill();
  ASSERT_EQ(RewriteQueueAsOldJson(dir_ + "/queue"), 2u);
  d = StartDaemon();
  ASSERT_NE(d, nullptr) << htam::ReadFileOrEmpty(dir_ + "/htamd.log");
  EXPECT_TRUE(Has(htam::ReadFileOrEmpty(dir_ + "/htamd.log"),
                  "2 job(s) queued before the restart will resume"))
      << htam::ReadFileOrEmpty(dir_ + "/htamd.log");
  AddWorker("upgraded");
  for (uint64_t id : jobs) {
    auto r = c.Poll(id, 180s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->done);
    EXPECT_EQ(r->status, fb::OutcomeStatus::Ok) << r->diagnostics;
  }
  EXPECT_EQ(Transitions(c, sid), 2u);
}

TEST_F(WorkersTest, AFullQueueAnswersBusy) {
  auto d = StartDaemon({{"worker.queue_per_device", "1"}});
  ASSERT_NE(d, nullptr);
  auto c = d->Connect(120s);
  ASSERT_NE(c, nullptr);
  uint64_t sid = OpenSession(*c);
  // No device yet: one job may wait; the next gets a clear busy answer, not an endless queue.
  auto first = Submit(*c, sid, Reference(), "first");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = Submit(*c, sid, Reference(), "second");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kResourceExhausted);
  EXPECT_TRUE(Has(second.status().message(), "busy")) << second.status().ToString();
  auto st = c->ServerStatus("workers");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(Num(*st, "busy_refusals"), 1) << *st;
  // Once a worker takes the job, there is room again.
  AddWorker("drain");
  auto r = c->Poll(*first, 120s);
  ASSERT_TRUE(r.ok() && r->done);
  EXPECT_EQ(r->status, fb::OutcomeStatus::Ok) << r->diagnostics;
  auto third = Submit(*c, sid, Reference(), "third");
  EXPECT_TRUE(third.ok()) << third.status().ToString();
}

TEST_F(WorkersTcpTest, WithCurveOnlyWorkersWithAnAuthorizedKeyJoin) {
  const std::string keys = dir_ + "/keys";
  std::filesystem::create_directories(keys);
  std::string cmd = std::string(HTAM_KEYGEN_PATH) + " " + keys + " server good bad >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::filesystem::copy_file(keys + "/good.pub", keys + "/authorized_workers");
  auto d = StartDaemon({{"worker.curve", "true"},
                        {"server.curve_secret_key_file", keys + "/server.key"},
                        {"worker.curve_authorized_keys", keys + "/authorized_workers"}});
  ASSERT_NE(d, nullptr);
  auto c = d->Connect(120s);
  ASSERT_NE(c, nullptr);
  std::string status = *c->ServerStatus("workers");
  EXPECT_EQ(StatusValue(status, "curve"), "on");
  const std::string endpoint = StatusValue(status, "endpoint");
  WorkerChild* bad = AddWorker("intruder", endpoint,
                               {"--worker.server_public_key_file", keys + "/server.pub",
                                "--worker.key_file", keys + "/bad.key"});
  WorkerChild* plain = AddWorker("plain", endpoint);
  AddWorker("trusted", endpoint,
            {"--worker.server_public_key_file", keys + "/server.pub", "--worker.key_file",
             keys + "/good.key"});
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) {
    status = s;
    return Has(s, "worker_trusted: ");
  })) << status;
  // The others never get a message through: they give up waiting and reconnect, again and again,
  // saying that their register found no answer and what to check (the endpoint, the protocol).
  auto gave_up = [](WorkerChild* w) {
    return Has(w->Log(), "no answer to register from") && Has(w->Log(), "worker protocol HTW2");
  };
  for (int i = 0; i < 1200 && !(gave_up(bad) && gave_up(plain)); ++i)
    std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(gave_up(bad)) << bad->Log();
  EXPECT_TRUE(gave_up(plain)) << plain->Log();
  status = *c->ServerStatus("workers");
  EXPECT_EQ(Num(status, "workers"), 1) << status;
  EXPECT_FALSE(Has(status, "worker_intruder")) << status;
  EXPECT_FALSE(Has(status, "worker_plain")) << status;
}

// A raw worker link (what an htam-worker of some version sends), for the protocol's edges.
class RawPeer {
 public:
  explicit RawPeer(const std::string& endpoint) : sock_(ctx_, zmq::socket_type::dealer) {
    sock_.set(zmq::sockopt::linger, 0);
    sock_.set(zmq::sockopt::rcvtimeo, 200);
    sock_.connect(endpoint);
  }
  void Send(const std::vector<std::string>& parts) {
    for (size_t i = 0; i < parts.size(); ++i)
      sock_.send(zmq::buffer(parts[i]),
                 i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  // The next message, or {} after `limit`.
  std::vector<std::string> Receive(std::chrono::milliseconds limit) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      std::vector<std::string> parts;
      zmq::message_t m;
      if (!sock_.recv(m)) continue;
      parts.push_back(m.to_string());
      while (m.more()) {
        (void)sock_.recv(m);
        parts.push_back(m.to_string());
      }
      return parts;
    }
    return {};
  }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
};

// An htam-worker of the protocol before schema/job.fbs registers as it always did ([HTW1][JSON]):
// it is answered in its own protocol with a refusal naming both versions, which such a worker
// prints and stops on ("the daemon refused this worker: protocol version HTW1 ...").
TEST_F(WorkersTest, AWorkerOfTheOlderProtocolIsToldItsVersion) {
  auto d = StartDaemon();
  ASSERT_NE(d, nullptr);
  RawPeer old(WorkerEndpoint());
  old.Send({"HTW1", R"({"type":"register","protocol":"HTW1","name":"old","host":"h",)"
                    R"("devices":[{"backend":"cpu","arch":"x86_64"}]})"});
  auto reply = old.Receive(30s);
  ASSERT_EQ(reply.size(), 2u);
  EXPECT_EQ(reply[0], "HTW1");
  auto m = nlohmann::json::parse(reply[1], nullptr, false);
  ASSERT_TRUE(m.is_object()) << reply[1];
  EXPECT_EQ(m.value("type", ""), "refused");
  const std::string why = m.value("message", "");
  EXPECT_TRUE(Has(why, "protocol version HTW1")) << why;
  EXPECT_TRUE(Has(why, "HTW2")) << why;
  auto c = d->Connect(120s);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(Num(*c->ServerStatus("workers"), "workers"), 0);
}

// A registered worker that answers with a result that is not a JobResult (truncated, JSON of the
// old protocol, garbage) is dropped with a message; the daemon goes on and a sound worker
// still gets the work done.
TEST_F(WorkersTest, AMalformedResultDropsItsWorkerNotTheDaemon) {
  auto d = StartDaemon();
  ASSERT_NE(d, nullptr);
  auto c = d->Connect(120s);
  ASSERT_NE(c, nullptr);
  RawPeer bad(WorkerEndpoint());
  bad.Send({"HTW2", "register",
            R"({"type":"register","protocol":"HTW2","name":"liar","host":"h","instance":"1",)"
            R"("devices":[{"backend":"cpu","arch":"x86_64","name":"fake"}]})"});
  auto reply = bad.Receive(30s);
  ASSERT_EQ(reply.size(), 3u);
  EXPECT_EQ(reply[0], "HTW2");
  EXPECT_EQ(reply[1], "registered");
  std::string status;
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) { return Num(s, "workers") == 1; }));
  bad.Send({"HTW2", "result", std::string("\x10\0\0\0HTJRtruncated", 17)});
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) {
    status = s;
    return Num(s, "workers") == 0;
  })) << status;
  EXPECT_TRUE(Has(htam::ReadFileOrEmpty(dir_ + "/htamd.log"), "malformed result"))
      << htam::ReadFileOrEmpty(dir_ + "/htamd.log");
  AddWorker("sound");
  ASSERT_TRUE(WaitStatus(*c, [&](const std::string& s) { return Num(s, "workers") == 1; }));
  uint64_t sid = OpenSession(*c);
  auto j = Submit(*c, sid, Reference(), "after the liar");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  auto r = c->Poll(*j, 120s);
  ASSERT_TRUE(r.ok() && r->done);
  EXPECT_EQ(r->status, fb::OutcomeStatus::Ok) << r->diagnostics;
}

}  // namespace
}  // namespace htam
