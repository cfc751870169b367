// The worker link's jobs and results (schema/job.fbs buffers with the task's files). See wire.h.
#include "daemon/eval/scheduler/wire.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "base/file.h"
#include "base/hash.h"
#include "daemon/eval/job_codec.h"

namespace htam::scheduler {
namespace {

bool SafeName(const std::string& n) {
  return !n.empty() && n.size() < 256 && n.find('/') == std::string::npos && n != "." &&
         n != ".." && n[0] != '.';
}

}  // namespace

Result<std::string> JobToWire(const eval::EvalJob& job, uint32_t attempt) {
  fb::JobSpecT spec = job;
  spec.task_dir.clear();  // a path on this host; the worker writes its own copy
  spec.context.clear();   // the daemon's, not the worker's
  spec.attempt = attempt;
  bool has_task_json = false;
  DIR* dir = opendir(job.task_dir.c_str());
  if (!dir) return Status::NotFound("task directory " + job.task_dir + " cannot be read");
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) names.push_back(e->d_name);
  closedir(dir);
  std::sort(names.begin(), names.end());  // the same task gives the same message
  for (const std::string& n : names) {
    if (!SafeName(n)) continue;
    std::string p = job.task_dir + "/" + n;
    struct stat st;
    if (stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > off_t(kMaxTaskFileBytes))
      continue;
    std::string text;
    if (!ReadWholeFile(p, &text)) continue;
    auto f = std::make_unique<fb::TaskFileT>();
    f->name = n;
    f->content.assign(text.begin(), text.end());
    spec.task_files.push_back(std::move(f));
    has_task_json |= n == "task.json";
  }
  if (!has_task_json) return Status::NotFound("no task.json in " + job.task_dir);
  spec.task_name = job.task_dir.substr(job.task_dir.find_last_of('/') + 1);
  return eval::PackJob(spec);
}

Result<eval::EvalJob> JobFromWire(std::string_view buffer, const std::string& task_root,
                                  uint64_t* job_id, uint32_t* attempt) {
  auto spec = eval::UnpackJob(buffer, "job message");
  if (!spec.ok()) return Status::InvalidArgument(spec.status().message());
  *job_id = spec->job_id;
  *attempt = spec->attempt;
  eval::EvalJob job(std::move(*spec));
  job.context.clear();
  // The remote protocol's own fields are read here, not carried further.
  const std::string name = std::exchange(job.task_name, {});
  const std::vector<std::unique_ptr<fb::TaskFileT>> files = std::exchange(job.task_files, {});
  job.attempt = 0;
  if (!SafeName(name)) return Status::InvalidArgument("bad task name '" + name + "'");
  if (job.backend.empty()) return Status::InvalidArgument("job without a backend");
  if (!job.candidate_hash.empty() && !IsContentKey(job.candidate_hash))
    return Status::InvalidArgument("bad candidate_hash (not 64 lowercase hex digits)");
  // Content-addressed directory: the same task version is written once and never rewritten.
  std::string all;
  bool has_task_json = false;
  for (const auto& f : files) {
    if (!f || !SafeName(f->name)) return Status::InvalidArgument("bad task file name");
    for (const auto& g : files)
      if (g != f && g && g->name == f->name)
        return Status::InvalidArgument("task file '" + f->name + "' twice");
    has_task_json |= f->name == "task.json";
    all += f->name + '\0' + std::string(f->content.begin(), f->content.end()) + '\0';
  }
  if (!has_task_json) return Status::InvalidArgument("job without task.json");
  std::string dir = task_root + "/" + name + "-" + Sha256Hex(all).substr(0, 16);
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    HTAM_RETURN_IF_ERROR(MakeDirs(task_root, 0755));
    HTAM_RETURN_IF_ERROR(PublishDir(dir, [&](const std::string& staging) {
      for (const auto& f : files)
        HTAM_RETURN_IF_ERROR(WriteFileAtomic(staging + "/" + f->name,
                                             std::string(f->content.begin(), f->content.end())));
      return Status::OK();
    }));
  }
  job.task_dir = dir;
  return job;
}

std::string ResultToWire(const eval::EvalResult& r, uint32_t attempt) {
  eval::EvalResult sent = r;
  sent.attempt = attempt;
  return eval::PackResult(sent);
}

Result<eval::EvalResult> ResultFromWire(std::string_view buffer, uint32_t* attempt) {
  auto r = eval::UnpackResult(buffer, "result message");
  if (!r.ok()) return Status::InvalidArgument(r.status().message());
  *attempt = r->attempt;
  r->attempt = 0;  // the protocol's, not the result's
  return std::move(*r);
}

}  // namespace htam::scheduler
