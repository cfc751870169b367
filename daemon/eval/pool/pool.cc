// The worker pool: keys, job script, the loop that submits, drains and cancels. See pool.h.
#include "daemon/eval/pool/pool.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <sstream>

#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "base/paths.h"
#include "daemon/common/auth.h"
#include "daemon/config/sections.h"

namespace htam::pool {
namespace {

constexpr const char* kComponent = "pool";

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// tcp://*:7879 and tcp://0.0.0.0:7879 are not addresses a compute node can dial.
std::string ConnectOf(const std::string& endpoint) {
  for (const char* wild : {"tcp://*:", "tcp://0.0.0.0:", "tcp://[::]:"}) {
    const std::string w = wild;
    if (endpoint.rfind(w, 0) == 0) return "tcp://" + HostName() + ":" + endpoint.substr(w.size());
  }
  return endpoint;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string WorkerBinary(const std::string& configured) {
  if (!configured.empty()) return configured;
  const std::string beside = ExecutableDir() + "/htam-worker";
  if (access(beside.c_str(), X_OK) == 0) return beside;
#ifdef HTAM_WORKER_BUILD_PATH
  if (access(HTAM_WORKER_BUILD_PATH, X_OK) == 0) return HTAM_WORKER_BUILD_PATH;
#endif
  return beside;
}

// A folder only this user may enter: created so, and an existing one narrowed to it.
Status PrivateDir(const std::string& dir) {
  HTAM_RETURN_IF_ERROR(MakeDirs(dir, 0700));
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::IOError("pool: " + dir + " is not a folder");
  if (st.st_uid != geteuid())
    return Status::FailedPrecondition("pool: " + dir + " belongs to another user (uid " +
                                      std::to_string(st.st_uid) + ")");
  if ((st.st_mode & 0077) != 0 && chmod(dir.c_str(), 0700) != 0)
    return Status::IOError("pool: cannot make " + dir + " private (mode 0700)");
  return Status::OK();
}

const char* StateName(ClusterJob::State s) {
  switch (s) {
    case ClusterJob::State::kPending: return "pending";
    case ClusterJob::State::kRunning: return "running";
    case ClusterJob::State::kEnding: return "ending";
  }
  return "?";
}

}  // namespace

Result<PoolOptions> PoolOptions::FromConfig(const Config& c) {
  const config::Pool p = config::Pool::From(c);
  const config::Worker w = config::Worker::From(c);
  const config::Server s = config::Server::From(c);
  PoolOptions o;
  o.manager = p.manager;
  if (o.manager.empty()) return o;
  if (o.manager != "slurm")
    return Status::InvalidArgument("pool.manager: '" + o.manager +
                                   "' is not a cluster scheduler htamd drives (slurm, or empty)");
  if (w.endpoint.empty())
    return Status::InvalidArgument(
        "pool.manager = slurm needs worker.endpoint (where the worker jobs connect)");
  std::istringstream backends(p.backends);
  for (std::string b; std::getline(backends, b, ',');) {
    b.erase(0, b.find_first_not_of(' '));
    b.erase(b.find_last_not_of(' ') + 1);
    if (!b.empty()) o.plan.backends.insert(b);
  }
  if (o.plan.backends.empty()) return Status::InvalidArgument("pool.backends names no backend");
  if (p.max_jobs < 1) return Status::InvalidArgument("pool.max_jobs must be at least 1");
  if (p.interval_ms < 10) return Status::InvalidArgument("pool.interval_ms must be at least 10");
  o.plan.max_jobs = static_cast<int>(p.max_jobs);
  o.plan.queued_per_job = static_cast<int>(std::max<int64_t>(1, p.queued_per_job));
  o.plan.idle_ms = std::max<int64_t>(0, p.idle_s) * 1000;
  o.plan.start_timeout_ms = std::max<int64_t>(1, p.start_timeout_s) * 1000;
  o.plan.job_name = p.job_name;
  if (p.job_name.empty() || p.job_name.find_first_of(" '\"$\\") != std::string::npos)
    return Status::InvalidArgument("pool.job_name must be a plain word");
  o.interval_ms = static_cast<int>(p.interval_ms);
  o.submit_retry_s = static_cast<int>(std::max<int64_t>(0, p.submit_retry_s));
  o.cancel_on_exit = p.cancel_on_exit;
  o.work_dir = p.work_dir.empty() ? config::General::From(c).data_dir + "/pool" : p.work_dir;
  if (!o.work_dir.empty() && o.work_dir[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) o.work_dir = std::string(cwd) + "/" + o.work_dir;
  }
  o.connect = p.connect.empty() ? ConnectOf(w.endpoint) : p.connect;
  o.worker_command = WorkerBinary(p.worker_command);
  o.worker_config = p.worker_config;
  o.worker_data_dir = p.worker_data_dir;
  o.partition = p.partition;
  o.gres = p.gres;
  o.account = p.account;
  o.time_limit = p.time_limit;
  o.sbatch_args = p.sbatch_args;
  o.cpus_per_job = static_cast<int>(std::max<int64_t>(0, p.cpus_per_job));
  o.mem_mb = static_cast<int>(std::max<int64_t>(0, p.mem_mb));
  o.slurm.sbatch = p.sbatch;
  o.slurm.squeue = p.squeue;
  o.slurm.scancel = p.scancel;
  o.slurm.job_name = p.job_name;
  o.slurm.timeout_s = double(std::max<int64_t>(1, p.command_timeout_s));
  o.curve = w.curve;
  o.server_secret_key_file = s.curve_secret_key_file;
  return o;
}

Result<std::unique_ptr<Pool>> Pool::Create(const PoolOptions& options,
                                           std::unique_ptr<ClusterManager> cluster) {
  if (options.manager.empty()) return std::unique_ptr<Pool>();
  std::unique_ptr<Pool> pool(new Pool(options, std::move(cluster)));
  HTAM_RETURN_IF_ERROR(pool->Prepare());
  return pool;
}

Status Pool::Prepare() {
  HTAM_ASSIGN_OR_RETURN(partition_, KindMap::Parse("pool.partition", opt_.partition));
  HTAM_ASSIGN_OR_RETURN(gres_, KindMap::Parse("pool.gres", opt_.gres));
  HTAM_ASSIGN_OR_RETURN(account_, KindMap::Parse("pool.account", opt_.account));
  HTAM_ASSIGN_OR_RETURN(time_limit_, KindMap::Parse("pool.time_limit", opt_.time_limit));
  HTAM_ASSIGN_OR_RETURN(sbatch_args_, KindMap::Parse("pool.sbatch_args", opt_.sbatch_args));
  HTAM_RETURN_IF_ERROR(MakeDirs(opt_.work_dir, 0755));
  logs_dir_ = opt_.work_dir + "/logs";
  HTAM_RETURN_IF_ERROR(PrivateDir(logs_dir_));
  const std::string keys = opt_.work_dir + "/keys";
  std::string key_args;
  if (opt_.curve) {
    if (opt_.server_secret_key_file.empty())
      return Status::InvalidArgument("pool with worker.curve needs server.curve_secret_key_file");
    HTAM_RETURN_IF_ERROR(PrivateDir(keys));
    HTAM_ASSIGN_OR_RETURN(auth::KeyPair server, auth::ReadKeyFile(opt_.server_secret_key_file));
    auto mine = auth::ReadKeyFile(keys + "/worker.key");
    if (!mine.ok() || mine->secret_key.empty()) {
      HTAM_ASSIGN_OR_RETURN(auth::KeyPair fresh, auth::GenerateKeyPair());
      HTAM_RETURN_IF_ERROR(auth::WriteKeyPair(keys, "worker", fresh));
      mine = fresh;
      HTAM_LOG(kInfo, kComponent) << "new worker key pair in " << keys;
    }
    worker_public_key_ = mine->public_key;
    HTAM_RETURN_IF_ERROR(WriteFileAtomic(
        keys + "/server.pub",
        "# htam CURVE public key 'server' (Z85)\npublic = " + server.public_key + "\n", 0600));
    key_args = " \\\n  --worker.server_public_key_file " + ShellQuote(keys + "/server.pub") +
               " \\\n  --worker.key_file " + ShellQuote(keys + "/worker.key");
  }
  // The script names files; it holds no key (Slurm keeps scripts where operators can read them).
  std::string script =
      "#!/bin/sh\n"
      "# A worker job of htamd's pool (pool.manager, docs/operations.md \"Clusters\"): htam-worker\n"
      "# for the backend named by the one argument. It holds no key: the worker reads its key\n"
      "# pair from a folder only this user can enter.\n"
      "exec " + ShellQuote(opt_.worker_command) +
      (opt_.worker_config.empty() ? "" : " --config " + ShellQuote(opt_.worker_config)) +
      " \\\n  --worker.connect " + ShellQuote(opt_.connect) + key_args +
      " \\\n  --worker.name " + ShellQuote(opt_.plan.job_name + "-") + "\"$SLURM_JOB_ID\"" +
      " \\\n  --general.data_dir " + ShellQuote(opt_.worker_data_dir + "-") + "\"$SLURM_JOB_ID\"" +
      " \\\n  --eval.backends \"$1\"\n";
  script_path_ = opt_.work_dir + "/worker-job.sh";
  HTAM_RETURN_IF_ERROR(WriteFileAtomic(script_path_, script, 0755));
  HTAM_LOG(kInfo, kComponent) << "slurm pool: up to " << opt_.plan.max_jobs << " worker job(s) '"
                              << opt_.plan.job_name << "' connecting to " << opt_.connect
                              << (opt_.curve ? " (CURVE)" : "") << ", idle after "
                              << opt_.plan.idle_ms / 1000 << " s; script " << script_path_;
  return Status::OK();
}

Pool::~Pool() {
  Stop();
}

void Pool::Start(FleetView* fleet) {
  fleet_ = fleet;
  fleet_->SetFleetStatus([this] { return StatusText(); });
  const int64_t now = NowMs();
  for (const auto& b : opt_.plan.backends) last_demand_[b] = now;
  thread_ = std::thread([this] { Loop(); });
}

void Pool::Stop() {
  {
    std::lock_guard<std::mutex> lock(wait_mu_);
    if (stop_) return;
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (fleet_) fleet_->SetFleetStatus(nullptr);
  if (!opt_.cancel_on_exit || !fleet_) return;
  auto jobs = cluster_->List();
  if (!jobs.ok()) {
    HTAM_LOG(kWarn, kComponent) << "cannot list the worker jobs to cancel them: "
                                << jobs.status().ToString();
    return;
  }
  for (const auto& j : *jobs) {
    Status st = cluster_->Cancel(j.id);
    if (st.ok()) {
      HTAM_LOG(kInfo, kComponent) << "worker job " << j.id << " cancelled (htamd stops)";
    } else {
      HTAM_LOG(kWarn, kComponent) << "worker job " << j.id << ": " << st.ToString();
    }
  }
}

void Pool::Loop() {
  while (true) {
    Tick();
    std::unique_lock<std::mutex> lock(wait_mu_);
    if (wake_.wait_for(lock, std::chrono::milliseconds(opt_.interval_ms), [this] { return stop_; }))
      return;
  }
}

void Pool::Tick() {
  const int64_t now = NowMs();
  auto listed = cluster_->List();
  if (!listed.ok()) {
    const std::string e = listed.status().ToString();
    if (e != last_list_error_) {
      HTAM_LOG(kWarn, kComponent) << "cannot list the worker jobs: " << e;
    }
    last_list_error_ = e;
    std::lock_guard<std::mutex> lock(status_mu_);
    last_error_ = e;
    return;
  }
  last_list_error_.clear();
  std::vector<ClusterJob> jobs = std::move(*listed);
  std::map<std::string, int64_t> since;
  for (auto& j : jobs) {
    if (j.state != ClusterJob::State::kRunning) continue;
    auto it = running_since_.find(j.id);
    since[j.id] = it == running_since_.end() ? now : it->second;
    j.running_ms = now - since[j.id];
  }
  running_since_ = std::move(since);

  const FleetSnapshot fleet = fleet_->Fleet();
  NoteEndedJobs(jobs, fleet, now);
  for (const auto& q : fleet.queues)
    if (q.queued > 0) last_demand_[q.backend] = now;
  std::map<std::string, int64_t> quiet;
  for (const auto& [b, t] : last_demand_) quiet[b] = now - t;
  const Plan plan = MakePlan(opt_.plan, fleet, jobs, quiet);

  for (const auto& [name, id] : plan.drain) {
    if (!fleet_->Drain(name)) continue;  // a job still runs there: next tick
    Status st = cluster_->Cancel(id);
    if (st.ok()) {
      cancelled_by_pool_.insert(id);
      HTAM_LOG(kInfo, kComponent) << "worker job " << id << " idle for "
                                  << opt_.plan.idle_ms / 1000 << " s (pool.idle_s): cancelled";
      std::lock_guard<std::mutex> lock(status_mu_);
      ++cancelled_idle_;
    } else {
      HTAM_LOG(kWarn, kComponent) << "worker job " << id << ": " << st.ToString();
    }
  }
  for (const auto& c : plan.cancel) {
    Status st = cluster_->Cancel(c.id);
    if (!st.ok()) {
      HTAM_LOG(kWarn, kComponent) << "worker job " << c.id << " " << c.why
                                  << ": cannot cancel: " << st.ToString();
      continue;
    }
    HTAM_LOG(kInfo, kComponent) << "worker job " << c.id << " " << c.why << ": cancelled";
    cancelled_by_pool_.insert(c.id);
    std::lock_guard<std::mutex> lock(status_mu_);
    ++cancelled_other_;
  }
  for (const auto& s : plan.submit) {
    if (now < retry_after_ms_) break;
    SubmitOne(s);
  }
  std::set<std::string> connected;
  for (const auto& j : jobs)
    for (const auto& w : fleet.workers)
      if (w.name == WorkerName(opt_.plan.job_name, j.id)) connected.insert(j.id);
  std::lock_guard<std::mutex> lock(status_mu_);
  jobs_ = std::move(jobs);
  connected_ = std::move(connected);
}

void Pool::NoteEndedJobs(const std::vector<ClusterJob>& jobs,
                         const FleetSnapshot& fleet, int64_t now) {
  std::map<std::string, bool> known;
  for (const auto& j : jobs) {
    bool connected = known_.count(j.id) && known_[j.id];
    for (const auto& w : fleet.workers)
      connected = connected || w.name == WorkerName(opt_.plan.job_name, j.id);
    known[j.id] = connected;
  }
  // A job gone from the list whose worker never connected failed to start (a node without the
  // backend's device, a worker that cannot reach pool.connect): pause submissions, so that a
  // broken setup does not become a stream of jobs.
  for (const auto& [id, connected] : known_) {
    if (known.count(id) || connected || cancelled_by_pool_.count(id)) continue;
    retry_after_ms_ = now + int64_t(opt_.submit_retry_s) * 1000;
    const std::string why = "worker job " + id + " ended before its worker connected (see " +
                            logs_dir_ + "/" + opt_.plan.job_name + "-" + id + ".out)";
    HTAM_LOG(kWarn, kComponent) << why << "; next submission in " << opt_.submit_retry_s
                                << " s (pool.submit_retry_s)";
    std::lock_guard<std::mutex> lock(status_mu_);
    ++submit_failures_;
    last_error_ = why;
  }
  for (auto it = cancelled_by_pool_.begin(); it != cancelled_by_pool_.end();)
    it = known.count(*it) ? std::next(it) : cancelled_by_pool_.erase(it);
  known_ = std::move(known);
}

void Pool::SubmitOne(const Submit& s) {
  JobRequest r;
  r.backend = s.backend;
  r.arch = s.arch;
  r.script_path = script_path_;
  r.work_dir = opt_.work_dir;
  r.output = logs_dir_ + "/%x-%j.out";
  r.partition = partition_.Get(s.backend, s.arch);
  r.gres = gres_.Get(s.backend, s.arch);
  r.account = account_.Get(s.backend, s.arch);
  r.time_limit = time_limit_.Get(s.backend, s.arch);
  r.extra_args = sbatch_args_.Get(s.backend, s.arch);
  r.cpus = opt_.cpus_per_job;
  r.mem_mb = opt_.mem_mb;
  auto id = cluster_->Submit(r);
  std::lock_guard<std::mutex> lock(status_mu_);
  if (!id.ok()) {
    ++submit_failures_;
    last_error_ = id.status().ToString();
    retry_after_ms_ = NowMs() + int64_t(opt_.submit_retry_s) * 1000;
    HTAM_LOG(kWarn, kComponent) << "cannot submit a worker job for backend '" << s.backend
                                << "': " << last_error_ << "; next try in " << opt_.submit_retry_s
                                << " s (pool.submit_retry_s)";
    return;
  }
  ++submitted_;
  known_[*id] = false;  // before the next squeue lists it
  HTAM_LOG(kInfo, kComponent) << "submitted worker job " << *id << " for backend '" << s.backend
                              << "'" << (s.arch.empty() ? "" : " arch '" + s.arch + "'")
                              << (r.gres.empty() ? "" : " gres " + r.gres)
                              << (r.partition.empty() ? "" : " partition " + r.partition);
}

std::string Pool::StatusText() {
  std::lock_guard<std::mutex> lock(status_mu_);
  size_t pending = 0, running = 0, ending = 0;
  for (const auto& j : jobs_) {
    if (j.state == ClusterJob::State::kPending) ++pending;
    if (j.state == ClusterJob::State::kRunning) ++running;
    if (j.state == ClusterJob::State::kEnding) ++ending;
  }
  std::ostringstream o;
  o << "pool_manager: " << opt_.manager << "\n"
    << "pool_job_name: " << opt_.plan.job_name << "\n"
    << "pool_max_jobs: " << opt_.plan.max_jobs << "\n"
    << "pool_jobs: " << jobs_.size() << "\n"
    << "pool_jobs_pending: " << pending << "\n"
    << "pool_jobs_running: " << running << "\n"
    << "pool_jobs_ending: " << ending << "\n"
    << "pool_workers_connected: " << connected_.size() << "\n"
    << "pool_jobs_submitted: " << submitted_ << "\n"
    << "pool_submit_failures: " << submit_failures_ << "\n"
    << "pool_jobs_cancelled_idle: " << cancelled_idle_ << "\n"
    << "pool_jobs_cancelled_other: " << cancelled_other_ << "\n"
    << "pool_last_error: " << last_error_ << "\n";
  for (const auto& j : jobs_)
    o << "pool_job_" << j.id << ": state=" << StateName(j.state) << " backend=" << j.backend
      << (j.arch.empty() ? "" : " arch=" + j.arch)
      << " worker=" << (connected_.count(j.id) ? "connected" : "none") << "\n";
  return o.str();
}

Result<std::unique_ptr<Pool>> CreatePool(const Config& config) {
  HTAM_ASSIGN_OR_RETURN(PoolOptions o, PoolOptions::FromConfig(config));
  if (o.manager.empty()) return std::unique_ptr<Pool>();
  auto slurm = std::make_unique<Slurm>(o.slurm);
  return Pool::Create(o, std::move(slurm));
}

}  // namespace htam::pool
