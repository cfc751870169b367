// Slurm through sbatch, squeue and scancel. See slurm.h.
#include "daemon/eval/pool/slurm.h"

#include <sstream>

#include "base/process.h"

namespace htam::pool {
namespace {

constexpr const char* kCommentPrefix = "htam:";

std::string Tail(const std::string& s) {
  std::string t = s;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t.size() > 400 ? "..." + t.substr(t.size() - 400) : t;
}

Result<std::string> Run(const std::vector<std::string>& argv, double timeout_s) {
  ProcessOptions po;
  po.timeout_s = timeout_s;
  po.max_output = 1 << 20;
  po.keep_tail = false;
  auto r = RunProcess(argv, po);
  if (!r.ok()) return r.status();
  if (r->timed_out)
    return Status::Unavailable(argv[0] + " did not answer within " +
                               std::to_string(int(timeout_s)) + " s (pool.command_timeout_s)");
  if (r->signaled || r->exit_code != 0)
    return Status::Unavailable(argv[0] + " failed (exit " + std::to_string(r->exit_code) + "): " +
                               Tail(r->output));
  return r->output;
}

ClusterJob::State StateOf(const std::string& s) {
  if (s == "PENDING" || s == "CONFIGURING" || s == "REQUEUED" || s == "REQUEUE_HOLD" ||
      s == "REQUEUE_FED" || s == "RESV_DEL_HOLD")
    return ClusterJob::State::kPending;
  if (s == "RUNNING") return ClusterJob::State::kRunning;
  return ClusterJob::State::kEnding;  // COMPLETING, SUSPENDED, PREEMPTED, STOPPED, SIGNALING ...
}

}  // namespace

std::vector<std::string> Slurm::SubmitArgs(const JobRequest& r) const {
  std::vector<std::string> a{opt_.sbatch, "--parsable", "--job-name=" + opt_.job_name,
                             "--comment=" + std::string(kCommentPrefix) + r.backend +
                                 (r.arch.empty() ? "" : "/" + r.arch),
                             "--nodes=1", "--ntasks=1", "--chdir=" + r.work_dir,
                             "--output=" + r.output};
  if (r.cpus > 0) a.push_back("--cpus-per-task=" + std::to_string(r.cpus));
  if (r.mem_mb > 0) a.push_back("--mem=" + std::to_string(r.mem_mb));
  if (!r.partition.empty()) a.push_back("--partition=" + r.partition);
  if (!r.gres.empty()) a.push_back("--gres=" + r.gres);
  if (!r.account.empty()) a.push_back("--account=" + r.account);
  if (!r.time_limit.empty()) a.push_back("--time=" + r.time_limit);
  std::istringstream extra(r.extra_args);
  for (std::string w; extra >> w;) a.push_back(w);
  a.push_back(r.script_path);
  a.push_back(r.backend);
  return a;
}

Result<std::string> Slurm::Submit(const JobRequest& request) {
  HTAM_ASSIGN_OR_RETURN(std::string out, Run(SubmitArgs(request), opt_.timeout_s));
  // --parsable: "id" or "id;cluster" (the last line; sbatch may warn before it).
  std::string line = Tail(out);
  if (size_t nl = line.rfind('\n'); nl != std::string::npos) line = line.substr(nl + 1);
  line = line.substr(0, line.find(';'));
  if (line.empty() || line.find_first_not_of("0123456789_") != std::string::npos)
    return Status::Unavailable("sbatch printed no job id: " + Tail(out));
  return line;
}

std::vector<ClusterJob> Slurm::ParseList(const std::string& output) {
  std::vector<ClusterJob> jobs;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find('|'), b = a == std::string::npos ? a : line.find('|', a + 1);
    if (b == std::string::npos) continue;
    std::string comment = line.substr(b + 1);
    while (!comment.empty() && (comment.back() == ' ' || comment.back() == '\r')) comment.pop_back();
    if (comment.rfind(kCommentPrefix, 0) != 0) continue;
    ClusterJob j;
    j.id = line.substr(0, a);
    j.state = StateOf(line.substr(a + 1, b - a - 1));
    const std::string kind = comment.substr(std::string(kCommentPrefix).size());
    const size_t slash = kind.find('/');
    j.backend = kind.substr(0, slash);
    if (slash != std::string::npos) j.arch = kind.substr(slash + 1);
    if (j.id.empty() || j.backend.empty()) continue;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

Result<std::vector<ClusterJob>> Slurm::List() {
  HTAM_ASSIGN_OR_RETURN(std::string out,
                        Run({opt_.squeue, "--noheader", "--me", "--name=" + opt_.job_name,
                             "--format=%i|%T|%k"},
                            opt_.timeout_s));
  return ParseList(out);
}

Status Slurm::Cancel(const std::string& id) {
  return Run({opt_.scancel, id}, opt_.timeout_s).status();
}

}  // namespace htam::pool
