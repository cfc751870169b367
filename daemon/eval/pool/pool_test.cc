// The worker pool's parts without a cluster: per-backend settings, the plan (what to submit,
// drain and cancel), sbatch's arguments and squeue's output, and the key folder and job script
// that Pool::Create writes (a real key pair on disk; the script must name the key, never hold it).
// The pool against a real Slurm: tests/integration/slurm_pool_test.py.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "base/file.h"
#include "daemon/common/auth.h"
#include "daemon/eval/pool/kind_map.h"
#include "daemon/eval/pool/plan.h"
#include "daemon/eval/pool/pool.h"
#include "daemon/eval/pool/slurm.h"

namespace htam::pool {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    char t[] = "/tmp/htam-pool-XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

TEST(KindMapTest, OneValueOrEntriesByBackendAndArch) {
  auto all = KindMap::Parse("pool.partition", "gpu");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->Get("cuda", "sm_90"), "gpu");
  auto gres = KindMap::Parse("pool.gres", "gpu:a100:1");  // ':' before any '=': one value
  ASSERT_TRUE(gres.ok());
  EXPECT_EQ(gres->Get("cuda", ""), "gpu:a100:1");
  auto args = KindMap::Parse("pool.sbatch_args", "--qos=high --constraint=ib");
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(args->Get("cpu", ""), "--qos=high --constraint=ib");

  auto m = KindMap::Parse("pool.gres", " cpu= ; cuda=gpu:1; cuda/sm_90=gpu:h100:1 ;*=x");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->Get("cuda", "sm_90"), "gpu:h100:1");
  EXPECT_EQ(m->Get("cuda", "sm_80"), "gpu:1");
  EXPECT_EQ(m->Get("cuda", ""), "gpu:1");
  EXPECT_EQ(m->Get("cpu", ""), "");
  EXPECT_EQ(m->Get("hip", "gfx942"), "x");
  auto empty = KindMap::Parse("pool.account", "");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->Get("cuda", ""), "");
}

TEST(KindMapTest, MalformedEntriesAreNamed) {
  auto no_eq = KindMap::Parse("pool.gres", "cuda=gpu:1;gpu:2");
  ASSERT_FALSE(no_eq.ok());
  EXPECT_NE(no_eq.status().message().find("pool.gres: entry 'gpu:2'"), std::string::npos);
  auto twice = KindMap::Parse("pool.partition", "cuda=a;cuda=b");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("'cuda' is given twice"), std::string::npos);
  EXPECT_FALSE(KindMap::Parse("pool.partition", "=a;cpu=b").ok());
}

PlanOptions Options() {
  PlanOptions o;
  o.backends = {"cpu", "cuda"};
  o.max_jobs = 4;
  o.queued_per_job = 1;
  o.idle_ms = 60000;
  o.start_timeout_ms = 120000;
  o.job_name = "htam-worker";
  return o;
}

FleetWorker Worker(const std::string& name, const std::string& backend, bool busy,
                   int64_t idle_ms) {
  FleetWorker w;
  w.name = name;
  w.devices.push_back(FleetDevice{backend, "x86", busy});
  w.idle_ms = busy ? 0 : idle_ms;
  return w;
}

ClusterJob Job(const std::string& id, ClusterJob::State s, const std::string& backend,
               int64_t running_ms = 0) {
  ClusterJob j;
  j.id = id;
  j.state = s;
  j.backend = backend;
  j.running_ms = running_ms;
  return j;
}

TEST(PlanTest, QueuedWorkWithNoDeviceSubmitsUpToTheLimit) {
  FleetSnapshot f;
  f.queues.push_back(FleetQueue{"cpu", "", 6});
  Plan p = MakePlan(Options(), f, {}, {});
  ASSERT_EQ(p.submit.size(), 4u);  // pool.max_jobs
  EXPECT_EQ(p.submit[0].backend, "cpu");
  EXPECT_TRUE(p.cancel.empty());

  // Jobs on the way (pending, or running before their worker connects) count as capacity.
  std::vector<ClusterJob> jobs{Job("11", ClusterJob::State::kPending, "cpu"),
                               Job("12", ClusterJob::State::kRunning, "cpu", 1000)};
  f.queues[0].queued = 3;
  p = MakePlan(Options(), f, jobs, {});
  EXPECT_EQ(p.submit.size(), 1u);

  PlanOptions two = Options();
  two.queued_per_job = 2;  // 3 queued, 2 per job: 2 jobs wanted, 2 on the way
  EXPECT_TRUE(MakePlan(two, f, jobs, {}).submit.empty());
}

TEST(PlanTest, BackendsOutsideThePoolAndServedQueuesSubmitNothing) {
  FleetSnapshot f;
  f.queues.push_back(FleetQueue{"hip", "", 5});  // not in pool.backends
  EXPECT_TRUE(MakePlan(Options(), f, {}, {}).submit.empty());
  f.queues = {FleetQueue{"cpu", "", 1}};
  f.workers.push_back(Worker("htam-worker-7", "cpu", false, 10));  // an idle device serves it
  EXPECT_TRUE(MakePlan(Options(), f, {Job("7", ClusterJob::State::kRunning, "cpu")}, {})
                  .submit.empty());
  // A draining worker serves nothing: a new job is wanted.
  f.workers[0].draining = true;
  EXPECT_EQ(MakePlan(Options(), f, {Job("7", ClusterJob::State::kRunning, "cpu")}, {})
                .submit.size(),
            1u);
}

TEST(PlanTest, ArchOfTheSessionPicksTheJobKind) {
  FleetSnapshot f;
  f.queues.push_back(FleetQueue{"cuda", "sm_90", 1});
  f.workers.push_back(Worker("htam-worker-3", "cuda", false, 0));  // arch x86: not sm_90
  Plan p = MakePlan(Options(), f, {Job("3", ClusterJob::State::kRunning, "cuda")}, {});
  ASSERT_EQ(p.submit.size(), 1u);
  EXPECT_EQ(p.submit[0].arch, "sm_90");
}

TEST(PlanTest, IdleWorkersDrainAndBusyOnesStay) {
  FleetSnapshot f;
  f.workers.push_back(Worker("htam-worker-1", "cpu", false, 61000));  // past pool.idle_s
  f.workers.push_back(Worker("htam-worker-2", "cpu", false, 1000));
  f.workers.push_back(Worker("htam-worker-3", "cpu", true, 0));
  f.workers.push_back(Worker("someone-else", "cpu", false, 999999));  // not a pool job
  std::vector<ClusterJob> jobs{Job("1", ClusterJob::State::kRunning, "cpu"),
                               Job("2", ClusterJob::State::kRunning, "cpu"),
                               Job("3", ClusterJob::State::kRunning, "cpu")};
  Plan p = MakePlan(Options(), f, jobs, {});
  ASSERT_EQ(p.drain.size(), 1u);
  EXPECT_EQ(p.drain[0].first, "htam-worker-1");
  EXPECT_EQ(p.drain[0].second, "1");
  EXPECT_TRUE(p.cancel.empty());
  EXPECT_TRUE(p.submit.empty());
}

TEST(PlanTest, PendingJobsWithoutDemandAndSilentJobsAreCancelled) {
  FleetSnapshot f;
  std::vector<ClusterJob> jobs{Job("5", ClusterJob::State::kPending, "cuda"),
                               Job("6", ClusterJob::State::kRunning, "cpu", 130000),
                               Job("7", ClusterJob::State::kRunning, "cpu", 5000)};
  Plan p = MakePlan(Options(), f, jobs, {{"cuda", 61000}, {"cpu", 0}});
  ASSERT_EQ(p.cancel.size(), 2u);
  EXPECT_EQ(p.cancel[0].id, "5");
  EXPECT_NE(p.cancel[0].why.find("pool.idle_s"), std::string::npos);
  EXPECT_EQ(p.cancel[1].id, "6");
  EXPECT_NE(p.cancel[1].why.find("pool.start_timeout_s"), std::string::npos);
  // Shortly quiet: the pending job stays.
  p = MakePlan(Options(), f, {jobs[0]}, {{"cuda", 1000}});
  EXPECT_TRUE(p.cancel.empty());
}

TEST(SlurmTest, SubmitArgumentsCarryTheKindAndResources) {
  SlurmOptions so;
  so.sbatch = "/usr/bin/sbatch";
  so.job_name = "htam-worker";
  Slurm s(so);
  JobRequest r;
  r.backend = "cuda";
  r.arch = "sm_90";
  r.script_path = "/srv/pool/worker-job.sh";
  r.work_dir = "/srv/pool";
  r.output = "/srv/pool/logs/%x-%j.out";
  r.partition = "h100";
  r.gres = "gpu:h100:1";
  r.account = "kernels";
  r.time_limit = "04:00:00";
  r.cpus = 2;
  r.mem_mb = 16384;
  r.extra_args = "--qos=high  --constraint=ib";
  const std::vector<std::string> want{
      "/usr/bin/sbatch",     "--parsable",        "--job-name=htam-worker",
      "--comment=htam:cuda/sm_90", "--nodes=1",   "--ntasks=1",
      "--chdir=/srv/pool",   "--output=/srv/pool/logs/%x-%j.out",
      "--cpus-per-task=2",   "--mem=16384",       "--partition=h100",
      "--gres=gpu:h100:1",   "--account=kernels", "--time=04:00:00",
      "--qos=high",          "--constraint=ib",   "/srv/pool/worker-job.sh",
      "cuda"};
  EXPECT_EQ(s.SubmitArgs(r), want);
}

TEST(SlurmTest, SqueueOutputBecomesJobs) {
  auto jobs = Slurm::ParseList(
      "101|RUNNING|htam:cpu\n102|PENDING|htam:cuda/sm_90\n103|COMPLETING|htam:cpu\n"
      "104|RUNNING|(null)\ngarbage\n105|CONFIGURING|htam:hip \n");
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[0].id, "101");
  EXPECT_EQ(jobs[0].state, ClusterJob::State::kRunning);
  EXPECT_EQ(jobs[1].backend, "cuda");
  EXPECT_EQ(jobs[1].arch, "sm_90");
  EXPECT_EQ(jobs[1].state, ClusterJob::State::kPending);
  EXPECT_EQ(jobs[2].state, ClusterJob::State::kEnding);
  EXPECT_EQ(jobs[3].id, "105");
  EXPECT_EQ(jobs[3].backend, "hip");
  EXPECT_EQ(jobs[3].state, ClusterJob::State::kPending);
}

class NoCluster : public ClusterManager {
 public:
  Result<std::string> Submit(const JobRequest&) override { return Status::Unavailable("none"); }
  Result<std::vector<ClusterJob>> List() override { return std::vector<ClusterJob>{}; }
  Status Cancel(const std::string&) override { return Status::OK(); }
};

TEST(PoolTest, KeysArePrivateAndTheScriptNamesThemWithoutHoldingThem) {
  TempDir t;
  auto server = auth::GenerateKeyPair();
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(auth::WriteKeyPair(t.path + "/daemon-keys", "server", *server).ok());
  PoolOptions o;
  o.manager = "slurm";
  o.plan.backends = {"cpu"};
  o.plan.job_name = "htam-worker";
  o.work_dir = t.path + "/pool";
  o.connect = "tcp://login1:7879";
  o.worker_command = "/opt/htam/bin/htam-worker";
  o.worker_data_dir = "/tmp/htam-worker";
  o.curve = true;
  o.server_secret_key_file = t.path + "/daemon-keys/server.key";
  // A work folder that others could read is narrowed, not trusted.
  ASSERT_TRUE(MakeDirs(o.work_dir + "/keys", 0755).ok());
  chmod((o.work_dir + "/keys").c_str(), 0755);

  auto pool = Pool::Create(o, std::make_unique<NoCluster>());
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  const std::string pub = (*pool)->worker_public_key();
  ASSERT_FALSE(pub.empty());
  struct stat st;
  ASSERT_EQ(stat((o.work_dir + "/keys").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((o.work_dir + "/keys/worker.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((o.work_dir + "/logs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto mine = auth::ReadKeyFile(o.work_dir + "/keys/worker.key");
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(mine->public_key, pub);
  auto served = auth::ReadKeyFile(o.work_dir + "/keys/server.pub");
  ASSERT_TRUE(served.ok());
  EXPECT_EQ(served->public_key, server->public_key);
  EXPECT_TRUE(served->secret_key.empty());

  const std::string script = ReadFileOrEmpty(o.work_dir + "/worker-job.sh");
  EXPECT_NE(script.find("--worker.key_file '" + o.work_dir + "/keys/worker.key'"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("--worker.connect 'tcp://login1:7879'"), std::string::npos);
  EXPECT_NE(script.find("--worker.name 'htam-worker-'\"$SLURM_JOB_ID\""), std::string::npos);
  EXPECT_EQ(script.find(mine->secret_key), std::string::npos);
  EXPECT_EQ(script.find(server->secret_key), std::string::npos);

  // A restart keeps the key pair: jobs submitted before it still authenticate.
  pool->reset();
  auto again = Pool::Create(o, std::make_unique<NoCluster>());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->worker_public_key(), pub);
}

TEST(PoolTest, CurveWithoutTheServerKeyIsRefused) {
  TempDir t;
  PoolOptions o;
  o.manager = "slurm";
  o.plan.backends = {"cpu"};
  o.plan.job_name = "htam-worker";
  o.work_dir = t.path + "/pool";
  o.curve = true;
  auto pool = Pool::Create(o, std::make_unique<NoCluster>());
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.status().message().find("server.curve_secret_key_file"), std::string::npos);
}

// A cluster whose jobs end at once (their worker never starts), and a scheduler with work queued.
class VanishingCluster : public ClusterManager {
 public:
  Result<std::string> Submit(const JobRequest&) override {
    std::lock_guard<std::mutex> lock(mu);
    return std::to_string(++submitted);
  }
  Result<std::vector<ClusterJob>> List() override { return std::vector<ClusterJob>{}; }
  Status Cancel(const std::string&) override { return Status::OK(); }
  std::mutex mu;
  int submitted = 0;
};

class QueuedFleet : public FleetView {
 public:
  FleetSnapshot Fleet() override {
    FleetSnapshot f;
    f.queues.push_back(FleetQueue{"cpu", "", 3});
    return f;
  }
  bool Drain(const std::string&) override { return false; }
  void SetFleetStatus(std::function<std::string()>) override {}
};

TEST(PoolTest, JobsThatEndBeforeTheirWorkerConnectsPauseSubmissions) {
  TempDir t;
  PoolOptions o;
  o.manager = "slurm";
  o.plan.backends = {"cpu"};
  o.plan.job_name = "htam-worker";
  o.plan.max_jobs = 1;
  o.plan.queued_per_job = 1;
  o.interval_ms = 20;
  o.submit_retry_s = 60;
  o.cancel_on_exit = false;
  o.work_dir = t.path + "/pool";
  auto cluster = std::make_unique<VanishingCluster>();
  VanishingCluster* c = cluster.get();
  auto pool = Pool::Create(o, std::move(cluster));
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  QueuedFleet fleet;
  (*pool)->Start(&fleet);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // about 20 ticks
  const std::string status = (*pool)->StatusText();
  (*pool)->Stop();
  std::lock_guard<std::mutex> lock(c->mu);
  EXPECT_EQ(c->submitted, 1) << status;
  EXPECT_NE(status.find("pool_submit_failures: 1"), std::string::npos) << status;
  EXPECT_NE(status.find("ended before its worker connected"), std::string::npos) << status;
}

}  // namespace
}  // namespace htam::pool
