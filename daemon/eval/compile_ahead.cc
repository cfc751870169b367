// Compiling ahead of the device: compile-only processes fill the runners' read-only cache.
// See compile_ahead.h.
#include "daemon/eval/compile_ahead.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

#include "base/file.h"
#include "base/log.h"
#include "daemon/eval/frame.h"
#include "daemon/eval/job_codec.h"

namespace htam::eval {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kComponent = "eval";

// The names in `dir` that are not hidden (a compile's temporary files start with a dot).
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

// Root-owned and read-only, recursively: no later process of the sandbox user can change it.
void Seal(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return;
  if (S_ISLNK(st.st_mode)) {
    unlink(path.c_str());  // a compile leaves no links; one here is not trusted
    return;
  }
  if (geteuid() == 0 && lchown(path.c_str(), 0, 0) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    for (const auto& n : Names(path)) Seal(path + "/" + n);
    chmod(path.c_str(), 0555);
  } else {
    chmod(path.c_str(), 0444);
  }
}

}  // namespace

CompileAhead::CompileAhead(CompileAheadOptions options, ArgvFor argv_for, SandboxFor sandbox_for,
                           ReferenceArgvFor reference_argv_for)
    : opt_(std::move(options)),
      argv_for_(std::move(argv_for)),
      sandbox_for_(std::move(sandbox_for)),
      reference_argv_for_(std::move(reference_argv_for)) {}

CompileAhead::~CompileAhead() {
  Stop();
}

Status CompileAhead::Start() {
  HTAM_RETURN_IF_ERROR(MakeDirs(opt_.cache_dir, 0711));
  HTAM_RETURN_IF_ERROR(MakeDirs(opt_.stage_dir, 0711));
  // Searchable, not listable: a runner opens an entry by its key and cannot see the others.
  chmod(opt_.cache_dir.c_str(), 0711);
  chmod(opt_.stage_dir.c_str(), 0711);
  for (const auto& n : Names(opt_.stage_dir)) RemoveTree(opt_.stage_dir + "/" + n);  // a crash's
  MutexLock lock(&mu_);
  for (int i = 0; i < std::max(1, opt_.threads); ++i) threads_.emplace_back([this] { Loop(); });
  return Status::OK();
}

void CompileAhead::Enqueue(uint64_t job_id, const std::string& backend, const std::string& arch,
                           const std::string& source) {
  auto e = std::make_shared<Entry>();
  e->job_id = job_id;
  e->backend = backend;
  e->arch = arch;
  e->source = source;
  MutexLock lock(&mu_);
  if (stopping_ || threads_.empty()) return;
  by_job_[job_id] = e;
  queue_.push_back(std::move(e));
  cv_.SignalAll();
}

void CompileAhead::EnqueueReference(const std::string& task_dir, const std::string& backend,
                                    const std::string& arch) {
  if (opt_.verifier_cache_dir.empty() || !reference_argv_for_) return;
  auto e = std::make_shared<Entry>();
  e->backend = backend;
  e->arch = arch;
  e->reference_task = task_dir;
  MutexLock lock(&mu_);
  if (stopping_ || threads_.empty()) return;
  if (!references_seen_.insert(task_dir + '\n' + backend + '\n' + arch).second) return;
  queue_.push_front(std::move(e));  // the task's first verification needs it before any candidate
  cv_.SignalAll();
}

bool CompileAhead::Claim(uint64_t job_id) {
  MutexLock lock(&mu_);
  auto it = by_job_.find(job_id);
  if (it == by_job_.end()) return false;
  std::shared_ptr<Entry> e = it->second;
  by_job_.erase(it);
  switch (e->state) {
    case State::kQueued:
      e->state = State::kDropped;  // its runner compiles it, as without compiling ahead
      ++dropped_;
      return false;
    case State::kRunning:
      ++late_;  // not waited for: the runner compiles it too (or finds the same source's build)
      return false;
    default: return e->state == State::kDone;
  }
}

void CompileAhead::CountHit() {
  MutexLock lock(&mu_);
  ++hits_;
}

std::string CompileAhead::StatusText() {
  MutexLock lock(&mu_);
  std::ostringstream o;
  o << "compile_ahead: on threads=" << threads_.size() << " queued=" << queue_.size()
    << " compiled=" << compiled_ << " failed=" << failed_ << " dropped=" << dropped_
    << " late=" << late_ << " runner_cache_hits=" << hits_ << " references=" << references_
    << " reference_failures=" << reference_failures_ << "\n";
  return o.str();
}

void CompileAhead::Stop() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    queue_.clear();
    threads.swap(threads_);
    cv_.SignalAll();
  }
  for (auto& t : threads)
    if (t.joinable()) t.join();
}

void CompileAhead::Loop() {
  for (;;) {
    std::shared_ptr<Entry> e;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && queue_.empty()) cv_.Wait(&mu_);
      if (stopping_) return;
      e = std::move(queue_.front());
      queue_.pop_front();
      if (e->state != State::kQueued) continue;  // claimed by its device first
      e->state = State::kRunning;
    }
    std::string why;
    const bool ok = Compile(*e, &why);
    if (!ok && !why.empty()) {
      HTAM_LOG(kDebug, kComponent) << (e->reference_task.empty()
                                            ? "job " + std::to_string(e->job_id)
                                            : "the reference of " + e->reference_task)
                                     << ": not compiled ahead: " << why;
    }
    MutexLock lock(&mu_);
    e->state = State::kDone;
    if (!e->reference_task.empty())
      ++(ok ? references_ : reference_failures_);
    else
      ++(ok ? compiled_ : failed_);
    cv_.SignalAll();
  }
}

bool CompileAhead::Compile(const Entry& e, std::string* why) {
  const bool reference = !e.reference_task.empty();
  std::string stage;  // a candidate's: its runner's only writable cache, published afterwards
  if (!reference) {
    MutexLock lock(&mu_);
    stage = opt_.stage_dir + "/" + std::to_string(getpid()) + "-" + std::to_string(next_stage_++);
  }
  struct Cleanup {
    std::string d;
    ~Cleanup() {
      if (!d.empty()) RemoveTree(d);
    }
  } cleanup{stage};
  if (!reference) {
    RemoveTree(stage);
    if (mkdir(stage.c_str(), 0700) != 0) {
      *why = "cannot create " + stage + ": " + strerror(errno);
      return false;
    }
    // The compile runs as the sandbox user: its runner writes here and nowhere else.
    if (opt_.stage_uid >= 0 && chown(stage.c_str(), uid_t(opt_.stage_uid), gid_t(opt_.stage_gid)))
      chmod(stage.c_str(), 0777);
  }

  auto w = WorkerProcess::Spawn(
      reference ? reference_argv_for_(e.backend) : argv_for_(e.backend, stage),
      sandbox_for_(e.backend));
  if (!w.ok()) {
    *why = w.status().ToString();
    return false;
  }
  const size_t cap = 64 << 10, flood = 1 << 20;
  auto hello = (*w)->Receive(Clock::now() + std::chrono::seconds(opt_.start_timeout_s), cap, flood);
  if (!hello.ok() || hello->value("type", "") != "hello") {
    *why = "the compile-only worker did not start: " +
           (hello.ok() ? hello->value("message", std::string("unexpected frame"))
                       : hello.status().ToString());
    (*w)->Kill();
    return false;
  }
  // The request is a job (schema/job.fbs): the source or, for a reference, the task's folder.
  fb::JobSpecT job;
  job.job_id = e.job_id;
  job.backend = e.backend;
  job.arch = e.arch;
  job.gate = std::make_unique<fb::GateSpecT>();
  job.gate->compile_timeout_s = opt_.compile_timeout_s;
  if (reference) {
    job.reference_only = true;
    job.task_dir = e.reference_task;  // the worker reads the reference from the task's folder
  } else {
    job.source = e.source;
  }
  if (Status st = (*w)->SendBuffer(PackJob(job)); !st.ok()) {
    *why = st.ToString();
    (*w)->Kill();
    return false;
  }
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(opt_.compile_timeout_s + 30));
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (stopping_) {
        (*w)->Kill();
        *why = "stopping";
        return false;
      }
    }
    auto f = (*w)->Receive(std::min(deadline, Clock::now() + std::chrono::milliseconds(250)), cap,
                           flood);
    if (f.ok()) {
      if (f->value("type", "") == "progress") continue;
      if (f->value("type", "") != "result") {
        *why = f->value("message", std::string("unexpected frame"));
        (*w)->Kill();
        return false;
      }
      (*w)->Reap(std::chrono::milliseconds(2000));
      auto compiled = UnpackResult(FrameBuffer(*f), "compile-only result");
      if (!compiled.ok()) {
        *why = compiled.status().ToString();
        return false;
      }
      if (compiled->status != fb::OutcomeStatus::Ok) {
        *why = "did not compile";  // the runner will say why, with its own diagnostics
        return false;
      }
      return reference || Publish(stage, why);  // a reference went into the verifiers' cache
    }
    if (f.status().code() == Status::Code::kTimeout && Clock::now() < deadline) continue;
    *why = "the compile-only worker ended: " + f.status().ToString();
    (*w)->Kill();
    return false;
  }
}

bool CompileAhead::Publish(const std::string& stage, std::string* why) {
  // Entries: a file at the top (cpu-<key>.so) or a directory one level down (cuda/<key>).
  std::vector<std::string> entries;
  for (const auto& n : Names(stage)) {
    struct stat st;
    const std::string p = stage + "/" + n;
    if (lstat(p.c_str(), &st) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      entries.push_back(n);
    } else if (S_ISDIR(st.st_mode)) {
      for (const auto& c : Names(p)) entries.push_back(n + "/" + c);
    } else {
      *why = "unexpected " + n + " in the staging directory";
      return false;
    }
  }
  if (entries.size() != 1) {
    *why = std::to_string(entries.size()) + " entries in the staging directory (one expected)";
    return false;
  }
  const std::string& rel = entries[0];
  if (auto slash = rel.find('/'); slash != std::string::npos) {
    const std::string sub = opt_.cache_dir + "/" + rel.substr(0, slash);
    if (mkdir(sub.c_str(), 0711) == 0 || errno == EEXIST) chmod(sub.c_str(), 0711);
  }
  const std::string from = stage + "/" + rel, to = opt_.cache_dir + "/" + rel;
  // As root the entry is sealed before it is visible (root renames a read-only directory); as
  // another user after (renaming a directory needs its write permission), with no user between
  // the runner and this process to keep apart anyway.
  const bool root = geteuid() == 0;
  if (root) Seal(from);
  if (Status moved = MovePath(from, to); !moved.ok()) {
    struct stat there;
    if (lstat(to.c_str(), &there) == 0) return true;  // another compile published it
    *why = "cannot publish " + to + ": " + moved.message();
    return false;
  }
  if (!root) Seal(to);
  return true;
}

}  // namespace htam::eval
