// Encoding of the worker link's jobs and results, and of durably queued jobs. See wire.h.
#include "daemon/scheduler/wire.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "base/file.h"
#include "base/hash.h"
#include "daemon/eval/profile_json.h"

namespace htam::scheduler {
namespace {

using nlohmann::json;

// The fields a job has alike on the wire and in the durable queue.
json JobCore(const eval::EvalJob& job) {
  return {{"job_id", job.job_id},     {"backend", job.backend}, {"arch", job.arch},
          {"language", job.language}, {"source", job.source},   {"session_id", job.session_id},
          {"profile", job.profile}};
}
// Reads them back; throws (json's exceptions) where job_id, backend or source is missing or not
// of its type.
void ReadJobCore(const json& j, eval::EvalJob* job) {
  job->job_id = j.at("job_id").get<uint64_t>();
  job->backend = j.at("backend").get<std::string>();
  job->arch = j.value("arch", "");
  job->language = j.value("language", "");
  job->source = j.at("source").get<std::string>();
  job->session_id = j.value("session_id", uint64_t(0));
  job->profile = j.value("profile", false);
}

bool SafeName(const std::string& n) {
  return !n.empty() && n.size() < 256 && n.find('/') == std::string::npos && n != "." &&
         n != ".." && n[0] != '.';
}

Status WriteFileAtomic(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::IOError("cannot write " + tmp);
    out << data;
    if (!out) return Status::IOError("cannot write " + tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) return Status::IOError("cannot rename " + tmp);
  return Status::OK();
}

}  // namespace

Result<json> JobToWire(const eval::EvalJob& job, uint32_t attempt) {
  json files = json::object();
  DIR* dir = opendir(job.task_dir.c_str());
  if (!dir) return Status::NotFound("task directory " + job.task_dir + " cannot be read");
  while (dirent* e = readdir(dir)) {
    std::string n = e->d_name;
    if (!SafeName(n)) continue;
    std::string p = job.task_dir + "/" + n;
    struct stat st;
    if (stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > off_t(kMaxTaskFileBytes))
      continue;
    std::string text;
    if (ReadWholeFile(p, &text)) files[n] = std::move(text);
  }
  closedir(dir);
  if (!files.contains("task.json")) return Status::NotFound("no task.json in " + job.task_dir);
  std::string name = job.task_dir.substr(job.task_dir.find_last_of('/') + 1);
  json msg = JobCore(job);
  msg["type"] = "job";
  msg["attempt"] = attempt;
  msg["task"] = {{"name", name}, {"files", files}};
  return msg;
}

Result<eval::EvalJob> JobFromWire(const json& msg, const std::string& task_root) {
  try {
    eval::EvalJob job;
    ReadJobCore(msg, &job);
    const json& task = msg.at("task");
    std::string name = task.at("name").get<std::string>();
    if (!SafeName(name)) return Status::InvalidArgument("bad task name '" + name + "'");
    const json& files = task.at("files");
    if (!files.is_object() || !files.contains("task.json"))
      return Status::InvalidArgument("job without task.json");
    // Content-addressed directory: the same task version is written once and never rewritten.
    std::string all;
    for (auto it = files.begin(); it != files.end(); ++it) {
      if (!SafeName(it.key()) || !it.value().is_string())
        return Status::InvalidArgument("bad task file '" + it.key() + "'");
      all += it.key() + '\0' + it.value().get<std::string>() + '\0';
    }
    std::string dir = task_root + "/" + name + "-" + Sha256Hex(all).substr(0, 16);
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) {
      std::string tmp = dir + ".tmp" + std::to_string(getpid());
      mkdir(task_root.c_str(), 0755);
      if (mkdir(tmp.c_str(), 0755) != 0 && errno != EEXIST)
        return Status::IOError("cannot create " + tmp);
      for (auto it = files.begin(); it != files.end(); ++it)
        HTAM_RETURN_IF_ERROR(WriteFileAtomic(tmp + "/" + it.key(), it.value().get<std::string>()));
      if (rename(tmp.c_str(), dir.c_str()) != 0 && stat(dir.c_str(), &st) != 0)
        return Status::IOError("cannot rename " + tmp);
    }
    job.task_dir = dir;
    return job;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("malformed job: ") + e.what());
  }
}

json ResultToWire(const eval::EvalResult& r) {
  return {{"type", "result"},
          {"job_id", r.job_id},
          {"status", int(r.status)},
          {"diagnostics", r.diagnostics},
          {"median_us", r.median_us},
          {"spread_us", r.spread_us},
          {"repetitions", r.repetitions},
          {"baseline_us", r.baseline_us},
          {"speedup", r.speedup},
          {"candidate_hash", r.candidate_hash},
          {"device", r.device},
          {"arch", r.arch},
          {"wall_ms", r.wall_ms},
          {"bottleneck", int(r.bottleneck)},
          {"profile", eval::ProfileToJson(r.profile)}};
}

eval::EvalResult ResultFromWire(const json& m) {
  eval::EvalResult r;
  r.job_id = m.value("job_id", uint64_t(0));
  int st = m.value("status", int(fb::OutcomeStatus::InfraError));
  r.status = st >= 0 && st <= int(fb::OutcomeStatus::MAX) ? fb::OutcomeStatus(st)
                                                          : fb::OutcomeStatus::InfraError;
  r.diagnostics = m.value("diagnostics", "");
  r.median_us = m.value("median_us", 0.0);
  r.spread_us = m.value("spread_us", 0.0);
  r.repetitions = m.value("repetitions", 0u);
  r.baseline_us = m.value("baseline_us", 0.0);
  r.speedup = m.value("speedup", 0.0);
  r.candidate_hash = m.value("candidate_hash", "");
  r.device = m.value("device", "");
  r.arch = m.value("arch", "");
  r.wall_ms = m.value("wall_ms", 0.0);
  if (m.contains("profile")) r.profile = eval::ProfileFromJson(m["profile"]);
  r.bottleneck = eval::BottleneckFromJson(m);
  return r;
}

json JobToJournal(const eval::EvalJob& job) {
  json j = JobCore(job);
  j["task_dir"] = job.task_dir;
  j["context"] = job.context;
  return j;
}

Result<eval::EvalJob> JobFromJournal(const json& j) {
  try {
    eval::EvalJob job;
    ReadJobCore(j, &job);
    job.task_dir = j.at("task_dir").get<std::string>();
    job.context = j.value("context", "");
    return job;
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("queued job: ") + e.what());
  }
}

}  // namespace htam::scheduler
