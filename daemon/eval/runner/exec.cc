// Candidate execution in this process or in a runner process; see exec.h.
#include "daemon/eval/runner/exec.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "daemon/eval/kernelbench/kb_candidate.h"

namespace htam {
namespace {

using nlohmann::json;
constexpr uint32_t kMaxRunnerFrame = 64u << 20;
constexpr size_t kMaxFds = 250;  // SCM_MAX_FD is 253; a large KernelBench answer has many memfds

std::set<std::string> ThreadIds() {
  std::set<std::string> ids;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ids.insert(e->d_name);
    closedir(d);
  }
  return ids;
}

// This process's children (every thread's), so that a call's new ones can be told from those it
// had before (the verifier's runner).
std::set<std::string> ChildPids() {
  std::set<std::string> pids;
  for (const auto& tid : ThreadIds()) {
    std::ifstream in("/proc/self/task/" + tid + "/children");
    std::string pid;
    while (in >> pid) pids.insert(pid);
  }
  return pids;
}

// Removes everything inside `dir` (not `dir` itself); "" = nothing to do. False on a failure.
bool EmptyDir(const std::string& dir) {
  if (dir.empty()) return true;
  std::error_code ec;
  bool ok = true;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code rm;
    std::filesystem::remove_all(e.path(), rm);
    ok = ok && !rm;
  }
  return ok && !ec;
}

bool HasNewChildren(const std::set<std::string>& before) {
  int st;
  if (waitpid(-1, &st, WNOHANG) > 0) return true;  // one already ended: reaped, and counted
  for (const auto& p : ChildPids())
    if (!before.count(p)) return true;
  return false;
}

ExecOutcome FromError(htam_backend_error* e, int32_t rc = 0) {
  ExecOutcome o;
  if (!e) return o;
  o.code = e->code;
  o.message = e->message ? e->message : "";
  o.kernel_rc = rc;
  htam_backend_error_free(e);
  return o;
}

// ---- in this process ----------------------------------------------------------------------

class LocalExec : public CandidateExec {
 public:
  LocalExec(BackendInstance* b, htam_device* d, LocalExecOptions o) : b_(b), dev_(d), opt_(o) {}
  ~LocalExec() override { Reset(); }

  Result<htam_buffer*> Allocate(htam_device* device, uint64_t bytes) override {
    htam_buffer* buf = nullptr;
    HTAM_RETURN_IF_ERROR(
        ConsumeError(b_->api().buffer_alloc(device, bytes, &buf), "allocating device buffer"));
    return buf;
  }

  CompileOutcome Compile(const std::string& source, const CompileSettings& s) override {
    ReleaseArtifact();
    htam_compile_request req{};
    req.struct_size = sizeof(req);
    req.source = source.data();
    req.source_len = source.size();
    req.language = s.language.c_str();
    req.arch = s.arch.c_str();
    req.options = s.options.c_str();
    req.name = s.name.c_str();
    req.timeout_s = s.timeout_s;
    CompileOutcome out;
    htam_backend_error* e = b_->api().compile(b_->handle(), &req, &art_);
    if (e) {
      out.code = e->code;
      out.diagnostics = e->message ? e->message : "";
      htam_backend_error_free(e);
      art_ = nullptr;
      return out;
    }
    htam_artifact_info info{};
    info.struct_size = sizeof(info);
    if (htam_backend_error* ie = b_->api().artifact_info(art_, &info)) {
      htam_backend_error_free(ie);
    } else {
      out.diagnostics = info.diagnostics ? info.diagnostics : "";
      out.ms = info.compile_ms;
      out.cached = info.from_cache != 0;
    }
    return out;
  }

  ExecOutcome Load() override {
    if (!art_) return ExecOutcome{HTAM_ERR_INVALID_ARGUMENT, 0, "nothing compiled to load"};
    if (mod_ && !leak_) b_->api().module_release(mod_);
    mod_ = nullptr;
    return FromError(b_->api().load(dev_, art_, &mod_));
  }

  ExecOutcome Run(const std::vector<BoundTensor>& in,
                  const std::vector<BoundTensor>& out) override {
    if (!mod_) return ExecOutcome{HTAM_ERR_INVALID_ARGUMENT, 0, "no module loaded"};
    std::vector<htam_tensor> din = Descs(in), dout = Descs(out);
    std::set<std::string> before = opt_.check_threads ? ThreadIds() : std::set<std::string>();
    std::set<std::string> kids = ChildPids();
    int32_t rc = 0;
    ExecOutcome o = FromError(
        b_->api().run(mod_, din.data(), int32_t(din.size()), dout.data(), int32_t(dout.size()), &rc),
        rc);
    if (o.code >= 0) return o;
    CheckLeftovers(before, kids, true, &o);
    return o;
  }

  ExecOutcome Time(const htam_timing_request& req, const std::vector<BoundTensor>& in,
                   const std::vector<BoundTensor>& out, htam_timing_result* res) override {
    if (!mod_) return ExecOutcome{HTAM_ERR_INVALID_ARGUMENT, 0, "no module loaded"};
    std::vector<htam_tensor> din = Descs(in), dout = Descs(out);
    htam_timing_request r = req;
    r.inputs = din.data();
    r.outputs = dout.data();
    std::set<std::string> before = opt_.check_threads ? ThreadIds() : std::set<std::string>();
    std::set<std::string> kids = ChildPids();
    ExecOutcome o = FromError(b_->api().time(mod_, &r, res));
    if (o.code >= 0) return o;
    CheckLeftovers(before, kids, false, &o);
    return o;
  }

  bool CanProfile() const override { return b_->api().profile != nullptr; }

  ExecOutcome Profile(const std::vector<BoundTensor>& in, const std::vector<BoundTensor>& out,
                      htam_profile_report* rep) override {
    if (!mod_ || !CanProfile()) return ExecOutcome{HTAM_ERR_UNSUPPORTED, 0, "no profile"};
    std::vector<htam_tensor> din = Descs(in), dout = Descs(out);
    return FromError(b_->api().profile(mod_, din.data(), int32_t(din.size()), dout.data(),
                                       int32_t(dout.size()), rep));
  }

  void Reset() override {
    if (mod_ && !leak_) b_->api().module_release(mod_);
    mod_ = nullptr;
    ReleaseArtifact();
  }

  std::string Where() const override { return "in-process"; }
  bool leaked() const { return leak_; }

 private:
  static std::vector<htam_tensor> Descs(const std::vector<BoundTensor>& v) {
    std::vector<htam_tensor> d;
    d.reserve(v.size());
    for (const auto& t : v) d.push_back(t.desc);
    return d;
  }
  void ReleaseArtifact() {
    if (art_ && !leak_) b_->api().artifact_release(art_);
    art_ = nullptr;
  }
  // Work must be complete when htam_kernel returns: threads it started must have ended, and it
  // must not leave processes behind.
  void CheckLeftovers(const std::set<std::string>& before, const std::set<std::string>& kids,
                      bool grace, ExecOutcome* o) {
    if (opt_.check_threads) {
      auto deadline = std::chrono::steady_clock::now() +
                      std::chrono::microseconds(int64_t(grace ? opt_.thread_grace_ms * 1000 : 0));
      size_t extra = 0;
      for (;;) {
        extra = 0;
        for (const auto& id : ThreadIds()) extra += before.count(id) ? 0 : 1;
        if (!extra || std::chrono::steady_clock::now() > deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (extra) leak_ = true;  // a stray thread may still use the module: never unload it
      o->extra_threads = extra;
    }
    o->children = HasNewChildren(kids);
  }

  BackendInstance* b_;
  htam_device* dev_;
  LocalExecOptions opt_;
  htam_artifact* art_ = nullptr;
  htam_module* mod_ = nullptr;
  bool leak_ = false;
};

// ---- wire helpers -------------------------------------------------------------------------

json OutcomeJson(const ExecOutcome& o) {
  return {{"code", o.code},
          {"kernel_rc", o.kernel_rc},
          {"message", o.message},
          {"extra_threads", o.extra_threads},
          {"children", o.children}};
}

ExecOutcome OutcomeFrom(const json& j) {
  ExecOutcome o;
  o.code = j.value("code", int32_t(HTAM_ERR_INTERNAL));
  o.kernel_rc = j.value("kernel_rc", 0);
  o.message = j.value("message", std::string());
  o.extra_threads = j.value("extra_threads", size_t(0));
  o.children = j.value("children", false);
  return o;
}

json TensorJson(uint64_t id, const BoundTensor& t) {
  json shape = json::array(), strides = json::array();
  for (int i = 0; i < t.desc.ndim && i < HTAM_MAX_DIMS; ++i) {
    shape.push_back(t.desc.shape[i]);
    strides.push_back(t.desc.strides[i]);
  }
  return {{"id", id}, {"offset", t.offset}, {"dtype", t.desc.dtype}, {"shape", shape},
          {"strides", strides}};
}

// ---- the verifier's side of a runner ------------------------------------------------------

class RemoteExec : public CandidateExec {
 public:
  RemoteExec(BackendInstance* b, int fd, int pid, bool runner_allocates)
      : b_(b), fd_(fd), pid_(pid), runner_allocates_(runner_allocates) {}
  ~RemoteExec() override {
    if (fd_ >= 0) close(fd_);
  }

  CompileOutcome Compile(const std::string& source, const CompileSettings& s) override {
    CompileOutcome out;
    auto r = Call({{"op", "compile"},
                   {"source", source},
                   {"language", s.language},
                   {"arch", s.arch},
                   {"options", s.options},
                   {"name", s.name},
                   {"timeout_s", s.timeout_s}},
                  {});
    if (!r.ok()) {
      out.code = HTAM_ERR_INTERNAL;
      out.runner_died = true;
      out.diagnostics = r.status().message();
      return out;
    }
    out.code = r->value("code", int32_t(HTAM_ERR_INTERNAL));
    out.diagnostics = r->value("diagnostics", std::string());
    out.ms = r->value("ms", 0.0);
    out.cached = r->value("cached", false);
    return out;
  }

  ExecOutcome Load() override { return Simple({{"op", "load"}}); }

  ExecOutcome Run(const std::vector<BoundTensor>& in,
                  const std::vector<BoundTensor>& out) override {
    json req = {{"op", "run"}};
    ExecOutcome o;
    if (!Bind(in, out, &req, &o)) return o;
    return Simple(req);
  }

  ExecOutcome Time(const htam_timing_request& rq, const std::vector<BoundTensor>& in,
                   const std::vector<BoundTensor>& out, htam_timing_result* res) override {
    json req = {{"op", "time"},
                {"num_sets", rq.num_sets},
                {"num_inputs", rq.num_inputs},
                {"num_outputs", rq.num_outputs},
                {"warmup_reps", rq.warmup_reps},
                {"warmup_ms", rq.warmup_ms},
                {"repetitions", rq.repetitions},
                {"flush_bytes", rq.flush_bytes},
                {"poison", rq.poison},
                {"poison_byte", rq.poison_byte},
                {"call_timeout_ms", rq.call_timeout_ms}};
    ExecOutcome o;
    if (!Bind(in, out, &req, &o)) return o;
    auto r = Call(req, {});
    if (!r.ok()) return Died(r.status());
    o = OutcomeFrom(*r);
    if (o.code >= 0) return o;
    const json& reps = (*r)["rep_us"];
    if (!reps.is_array() || int(reps.size()) != rq.repetitions)
      return ExecOutcome{HTAM_ERR_INTERNAL, 0, "runner answered a wrong number of timings"};
    for (int i = 0; i < rq.repetitions; ++i) res->rep_us[i] = reps[size_t(i)].get<double>();
    res->warmup_done = r->value("warmup_done", 0);
    res->all_streams = r->value("all_streams", 0);
    res->sm_clock_mhz = r->value("sm_clock_mhz", -1);
    res->mem_clock_mhz = r->value("mem_clock_mhz", -1);
    return o;
  }

  bool CanProfile() const override { return b_->api().profile != nullptr; }

  ExecOutcome Profile(const std::vector<BoundTensor>& in, const std::vector<BoundTensor>& out,
                      htam_profile_report* rep) override {
    json req = {{"op", "profile"}};
    ExecOutcome o;
    if (!Bind(in, out, &req, &o)) return o;
    auto r = Call(req, {});
    if (!r.ok()) return Died(r.status());
    o = OutcomeFrom(*r);
    if (o.code < 0 && r->contains("report")) {
      const json& p = (*r)["report"];
      rep->registers = p.value("registers", -1);
      rep->shared_bytes = p.value("shared_bytes", -1);
      rep->spill_bytes = p.value("spill_bytes", -1);
      rep->dram_throughput = p.value("dram_throughput", -1.0f);
      rep->sm_throughput = p.value("sm_throughput", -1.0f);
      rep->occupancy = p.value("occupancy", -1.0f);
      rep->sm_clock_mhz = p.value("sm_clock_mhz", -1);
      rep->mem_clock_mhz = p.value("mem_clock_mhz", -1);
    }
    return o;
  }

  Result<htam_buffer*> Allocate(htam_device* device, uint64_t bytes) override {
    if (!runner_allocates_ || !b_->api().buffer_import) {
      htam_buffer* buf = nullptr;
      HTAM_RETURN_IF_ERROR(
          ConsumeError(b_->api().buffer_alloc(device, bytes, &buf), "allocating device buffer"));
      return buf;
    }
    uint64_t id = next_id_++;
    std::vector<int> fds;
    auto r = Call({{"op", "alloc"}, {"id", id}, {"bytes", bytes}}, {}, &fds);
    if (!r.ok()) {
      for (int f : fds) close(f);
      return Status::Unavailable("the runner process died: " + r.status().message());
    }
    ExecOutcome o = OutcomeFrom(*r);
    if (o.code >= 0) {
      for (int f : fds) close(f);
      return o.code == HTAM_ERR_OUT_OF_MEMORY ? Status::ResourceExhausted(o.message)
                                              : Status::Internal("runner allocation: " + o.message);
    }
    htam_buffer_handle h{};
    h.struct_size = sizeof(h);
    h.bytes = bytes;
    h.fd = -1;
    if (r->value("has_fd", false)) {
      if (fds.empty()) return Status::Internal("runner allocation without its descriptor");
      h.fd = fds.front();
      fds.erase(fds.begin());
    }
    for (int f : fds) close(f);
    const json& data = r->contains("data") ? (*r)["data"] : json::array();
    for (const auto& v : data) {
      if (h.data_len >= sizeof h.data) break;
      h.data[h.data_len++] = uint8_t(v.get<int>());
    }
    htam_buffer* buf = nullptr;
    Status st = ConsumeError(b_->api().buffer_import(device, &h, &buf), "importing a runner buffer");
    if (!st.ok()) {
      (void)Call({{"op", "release"}, {"id", id}}, {});
      return st;
    }
    ids_[buf] = id;
    owned_.insert(buf);
    return buf;
  }

  bool Allocated(htam_buffer* b) const override { return owned_.count(b) != 0; }

  void Forget(htam_buffer* b) override {
    auto it = ids_.find(b);
    if (it == ids_.end()) return;
    if (!dead_) (void)Call({{"op", "release"}, {"id", it->second}}, {});
    ids_.erase(it);
    owned_.erase(b);
  }

  void Reset() override {
    if (!dead_) {
      auto r = Call({{"op", "reset"}}, {});
      if (r.ok() && r->value("retire", false)) retired_ = r->value("message", std::string());
    }
    ids_.clear();
    owned_.clear();
  }
  std::string Retired() const override { return retired_; }

  std::string Where() const override { return "runner (pid " + std::to_string(pid_) + ")"; }

  Result<json> Forward(const json& req, std::vector<int>* fds) override {
    if (dead_) return Status::IOError("the runner is gone");
    Status st = SendFrameFds(fd_, req, {});
    if (st.ok()) {
      auto r = RecvFrameFds(fd_, fds);
      if (r.ok() && r->value("ending", false)) dead_ = true;
      if (r.ok()) return r;
      st = r.status();
    }
    dead_ = true;
    return Status::IOError("the runner process died: " + st.message());
  }

 private:
  ExecOutcome Died(const Status& st) {
    ExecOutcome o;
    o.code = HTAM_ERR_DEVICE_FAULT;
    o.runner_died = true;
    o.message = "the runner process died: " + st.message();
    return o;
  }
  ExecOutcome Simple(const json& req) {
    auto r = Call(req, {});
    if (!r.ok()) return Died(r.status());
    return OutcomeFrom(*r);
  }
  // Shares every buffer the tensors live in (once per buffer) and writes their descriptions.
  bool Bind(const std::vector<BoundTensor>& in, const std::vector<BoundTensor>& out, json* req,
            ExecOutcome* o) {
    for (const auto* set : {&in, &out}) {
      json arr = json::array();
      for (const auto& t : *set) {
        auto id = Share(t.buffer);
        if (!id.ok()) {
          *o = dead_ ? Died(id.status())
                     : ExecOutcome{HTAM_ERR_INTERNAL, 0, "sharing a buffer with the runner: " +
                                                             id.status().message()};
          return false;
        }
        arr.push_back(TensorJson(*id, t));
      }
      (*req)[set == &in ? "inputs" : "outputs"] = arr;
    }
    return true;
  }
  Result<uint64_t> Share(htam_buffer* b) {
    auto it = ids_.find(b);
    if (it != ids_.end()) return it->second;
    htam_buffer_handle h{};
    h.struct_size = sizeof(h);
    h.fd = -1;
    HTAM_RETURN_IF_ERROR(ConsumeError(b_->api().buffer_export(b, &h), "buffer export"));
    uint64_t id = next_id_++;
    std::string data(reinterpret_cast<const char*>(h.data), std::min<uint32_t>(h.data_len, 128));
    json bytes = json::array();
    for (unsigned char c : data) bytes.push_back(int(c));
    std::vector<int> fds;
    if (h.fd >= 0) fds.push_back(h.fd);
    auto r = Call({{"op", "import"}, {"id", id}, {"bytes", h.bytes}, {"data", bytes},
                   {"has_fd", h.fd >= 0}},
                  fds);
    if (!r.ok()) return r.status();
    ExecOutcome o = OutcomeFrom(*r);
    if (o.code >= 0) return Status::Internal("the runner could not import a buffer: " + o.message);
    ids_[b] = id;
    return id;
  }
  Result<json> Call(const json& req, const std::vector<int>& fds,
                    std::vector<int>* got = nullptr) {
    if (dead_) return Status::IOError("the runner is gone");
    Status st = SendFrameFds(fd_, req, fds);
    if (st.ok()) {
      std::vector<int> none;
      auto r = RecvFrameFds(fd_, got ? got : &none);
      for (int f : none) close(f);
      // A runner that ends after this answer may leave processes holding its socket open.
      if (r.ok() && r->value("ending", false)) dead_ = true;
      if (r.ok()) return r;
      st = r.status();
    }
    dead_ = true;
    return st;
  }

  BackendInstance* b_;
  int fd_;
  int pid_;
  bool runner_allocates_;
  bool dead_ = false;
  std::string retired_;  // the runner's reason to serve no more jobs (Retired())
  uint64_t next_id_ = 1;
  std::map<htam_buffer*, uint64_t> ids_;
  std::set<htam_buffer*> owned_;  // imported views of buffers the runner allocated
};

bool WriteAll(int fd, const char* p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool ReadAll(int fd, char* p, size_t n, std::vector<int>* fds, bool* eof_at_start) {
  size_t got = 0;
  while (got < n) {
    char cbuf[CMSG_SPACE(sizeof(int) * kMaxFds)];
    iovec iov{p + got, n - got};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = cbuf;
    m.msg_controllen = sizeof cbuf;
    ssize_t r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (eof_at_start) *eof_at_start = got == 0 && r == 0;
      return false;
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const int* f = reinterpret_cast<const int*>(CMSG_DATA(c));
        for (size_t i = 0; i < k; ++i) fds->push_back(f[i]);
      }
    }
    got += size_t(r);
  }
  return true;
}

// ---- the runner's side --------------------------------------------------------------------

class RunnerServer {
 public:
  RunnerServer(BackendInstance* b, htam_device* d, LocalExecOptions o)
      : b_(b), dev_(d), exec_(b, d, o), options_(o) {
    used_at_start_ = DeviceMemoryUsed();
  }
  ~RunnerServer() {
    for (auto& [id, buf] : bufs_) b_->api().buffer_free(buf);
  }

  int Loop(int fd) {
    for (;;) {
      std::vector<int> fds;
      auto req = RecvFrameFds(fd, &fds);
      if (!req.ok()) {
        for (int f : fds) close(f);
        return req.status().IsNotFound() ? 0 : 2;
      }
      bool failed = false;
      reply_fds_.clear();
      // kb_* requests go to the KernelBench harness (kb_candidate.h): outputs come back as fds.
      json reply = req->value("op", "").rfind("kb_", 0) == 0
                       ? kb_.Handle(*req, &reply_fds_, &failed)
                       : Handle(*req, &fds, &failed);
      for (int f : fds) close(f);  // any descriptor no request took
      if (failed) reply["ending"] = true;  // the verifier asks nothing more of this runner
      Status sent = SendFrameFds(fd, reply, reply_fds_);
      for (int f : reply_fds_) close(f);  // the verifier has its own copies now
      reply_fds_.clear();
      if (!sent.ok()) return 2;
      if (failed) return 1;
    }
  }

 private:
  // Device memory in use on the runner's device (0: unknown; the plugin lacks API 1.4's entry).
  uint64_t DeviceMemoryUsed() {
    if (!dev_ || !b_->api().device_memory_used) return 0;
    uint64_t used = 0;
    if (ConsumeError(b_->api().device_memory_used(dev_, &used), "device_memory_used").ok())
      return used;
    return 0;
  }

  json Handle(const json& r, std::vector<int>* fds, bool* failed) {
    const std::string op = r.value("op", "");
    if (op == "compile") {
      CompileSettings s;
      s.language = r.value("language", "");
      s.arch = r.value("arch", "");
      s.options = r.value("options", "");
      s.name = r.value("name", "candidate");
      s.timeout_s = r.value("timeout_s", 60.0);
      CompileOutcome c = exec_.Compile(r.value("source", ""), s);
      return {{"code", c.code}, {"diagnostics", c.diagnostics}, {"ms", c.ms}, {"cached", c.cached}};
    }
    if (op == "load") return Judge(exec_.Load(), failed);
    if (op == "import") return Import(r, fds);
    if (op == "alloc") return Alloc(r);
    if (op == "release") {
      auto it = bufs_.find(r.value("id", uint64_t(0)));
      if (it != bufs_.end()) {
        b_->api().buffer_free(it->second);
        bufs_.erase(it);
      }
      return OutcomeJson(ExecOutcome{});
    }
    if (op == "reset") {
      exec_.Reset();
      kb_.Stop();
      for (auto& [id, buf] : bufs_) b_->api().buffer_free(buf);
      bufs_.clear();
      sizes_.clear();
      // Nothing a candidate wrote here (files, compile outputs) is left for the next job.
      if (!EmptyDir(options_.reset_dir)) return OutcomeJson(ExecOutcome{HTAM_ERR_INTERNAL, 0, "cannot empty the runner's directory"});
      // Device memory that a candidate allocated and never freed outlives its module: past the
      // limit this runner retires (the verifier ends it after this job; the next gets a fresh one).
      const uint64_t used = DeviceMemoryUsed();
      if (options_.leak_limit_bytes && used_at_start_ && used &&
          used > used_at_start_ + options_.leak_limit_bytes) {
        json j = OutcomeJson(ExecOutcome{HTAM_ERR_OUT_OF_MEMORY, 0,
                                         "candidates left " +
                                             std::to_string((used - used_at_start_) >> 20) +
                                             " MiB of device memory allocated in the runner "
                                             "(eval.runner_leak_mb " +
                                             std::to_string(options_.leak_limit_bytes >> 20) +
                                             ")"});
        j["retire"] = true;
        return j;
      }
      return OutcomeJson(ExecOutcome{});
    }
    std::vector<BoundTensor> in, out;
    std::string bad;
    if (!Tensors(r, "inputs", &in, &bad) || !Tensors(r, "outputs", &out, &bad))
      return OutcomeJson(ExecOutcome{HTAM_ERR_INVALID_ARGUMENT, 0, bad});
    if (op == "run") return Judge(exec_.Run(in, out), failed);
    if (op == "time") {
      htam_timing_request q{};
      q.struct_size = sizeof(q);
      q.num_sets = r.value("num_sets", 1);
      q.num_inputs = r.value("num_inputs", 0);
      q.num_outputs = r.value("num_outputs", 0);
      q.warmup_reps = r.value("warmup_reps", 0);
      q.warmup_ms = r.value("warmup_ms", 0.0);
      q.repetitions = r.value("repetitions", 1);
      q.flush_bytes = r.value("flush_bytes", uint64_t(0));
      q.poison = r.value("poison", 0);
      q.poison_byte = r.value("poison_byte", uint8_t(0));
      q.call_timeout_ms = r.value("call_timeout_ms", 0.0);
      if (q.num_sets < 1 || q.repetitions < 1 || q.repetitions > 1000000 ||
          size_t(q.num_sets) * size_t(q.num_inputs) != in.size() ||
          size_t(q.num_sets) * size_t(q.num_outputs) != out.size())
        return OutcomeJson(ExecOutcome{HTAM_ERR_INVALID_ARGUMENT, 0, "bad timing request"});
      std::vector<double> reps(size_t(q.repetitions), 0.0);
      htam_timing_result res{};
      res.struct_size = sizeof(res);
      res.rep_us = reps.data();
      res.sm_clock_mhz = res.mem_clock_mhz = -1;
      json j = Judge(exec_.Time(q, in, out, &res), failed);
      j["rep_us"] = reps;
      j["warmup_done"] = res.warmup_done;
      j["all_streams"] = res.all_streams;
      j["sm_clock_mhz"] = res.sm_clock_mhz;
      j["mem_clock_mhz"] = res.mem_clock_mhz;
      return j;
    }
    if (op == "profile") {
      htam_profile_report p{};
      p.struct_size = sizeof(p);
      p.registers = p.shared_bytes = p.spill_bytes = p.sm_clock_mhz = p.mem_clock_mhz = -1;
      p.dram_throughput = p.sm_throughput = p.occupancy = -1;
      json j = OutcomeJson(exec_.Profile(in, out, &p));
      j["report"] = {{"registers", p.registers},         {"shared_bytes", p.shared_bytes},
                     {"spill_bytes", p.spill_bytes},     {"dram_throughput", p.dram_throughput},
                     {"sm_throughput", p.sm_throughput}, {"occupancy", p.occupancy},
                     {"sm_clock_mhz", p.sm_clock_mhz},   {"mem_clock_mhz", p.mem_clock_mhz}};
      return j;
    }
    *failed = true;
    return OutcomeJson(ExecOutcome{HTAM_ERR_INVALID_ARGUMENT, 0, "unknown runner request " + op});
  }

  static json Judge(const ExecOutcome& o, bool* failed) {
    if (!o.ok()) *failed = o.code == HTAM_ERR_DEVICE_FAULT || o.extra_threads || o.children;
    return OutcomeJson(o);
  }

  // A buffer of the runner's own, exported to the verifier (MakeRemoteExec's runner_allocates).
  json Alloc(const json& r) {
    const uint64_t id = r.value("id", uint64_t(0)), bytes = r.value("bytes", uint64_t(0));
    if (!b_->api().buffer_export)
      return OutcomeJson(ExecOutcome{HTAM_ERR_UNSUPPORTED, 0, "the plugin cannot export"});
    if (bufs_.count(id))
      return OutcomeJson(ExecOutcome{HTAM_ERR_INVALID_ARGUMENT, 0, "buffer id in use"});
    htam_buffer* buf = nullptr;
    ExecOutcome o = FromError(b_->api().buffer_alloc(dev_, bytes, &buf));
    if (o.code >= 0) return OutcomeJson(o);
    htam_buffer_handle h{};
    h.struct_size = sizeof(h);
    h.fd = -1;
    o = FromError(b_->api().buffer_export(buf, &h));
    if (o.code >= 0) {
      b_->api().buffer_free(buf);
      return OutcomeJson(o);
    }
    bufs_[id] = buf;
    sizes_[id] = bytes;
    json j = OutcomeJson(o);
    json data = json::array();
    for (uint32_t i = 0; i < std::min<uint32_t>(h.data_len, sizeof h.data); ++i)
      data.push_back(int(h.data[i]));
    j["data"] = data;
    j["has_fd"] = h.fd >= 0;
    if (h.fd >= 0) {
      int dup_fd = dup(h.fd);  // the buffer keeps its own descriptor
      if (dup_fd >= 0) reply_fds_.push_back(dup_fd);
      else j["has_fd"] = false;
    }
    return j;
  }

  json Import(const json& r, std::vector<int>* fds) {
    htam_buffer_handle h{};
    h.struct_size = sizeof(h);
    h.bytes = r.value("bytes", uint64_t(0));
    h.fd = -1;
    if (r.value("has_fd", false)) {
      if (fds->empty())
        return OutcomeJson(ExecOutcome{HTAM_ERR_INVALID_ARGUMENT, 0, "import without its fd"});
      h.fd = fds->front();
      fds->erase(fds->begin());
    }
    const json& data = r.contains("data") ? r["data"] : json::array();
    for (const auto& v : data) {
      if (h.data_len >= sizeof h.data) break;
      h.data[h.data_len++] = uint8_t(v.get<int>());
    }
    if (!b_->api().buffer_import) {
      if (h.fd >= 0) close(h.fd);
      return OutcomeJson(ExecOutcome{HTAM_ERR_UNSUPPORTED, 0, "the plugin cannot import"});
    }
    htam_buffer* buf = nullptr;
    ExecOutcome o = FromError(b_->api().buffer_import(dev_, &h, &buf));
    if (o.code < 0) {
      uint64_t id = r.value("id", uint64_t(0));
      auto old = bufs_.find(id);
      if (old != bufs_.end()) b_->api().buffer_free(old->second);
      bufs_[id] = buf;
      sizes_[id] = h.bytes;
    }
    return OutcomeJson(o);
  }

  bool Tensors(const json& r, const char* key, std::vector<BoundTensor>* out, std::string* bad) {
    if (!r.contains(key) || !r[key].is_array()) return true;
    for (const auto& t : r[key]) {
      BoundTensor b;
      uint64_t id = t.value("id", uint64_t(0));
      auto it = bufs_.find(id);
      if (it == bufs_.end()) {
        *bad = "tensor in an unknown buffer";
        return false;
      }
      b.buffer = it->second;
      b.offset = t.value("offset", uint64_t(0));
      b.desc.dtype = t.value("dtype", 0);
      const json& shape = t["shape"];
      const json& strides = t["strides"];
      if (!shape.is_array() || shape.size() > HTAM_MAX_DIMS || strides.size() != shape.size()) {
        *bad = "bad tensor shape";
        return false;
      }
      b.desc.ndim = int32_t(shape.size());
      uint64_t numel = 1;
      for (size_t i = 0; i < shape.size(); ++i) {
        b.desc.shape[i] = shape[i].get<int64_t>();
        b.desc.strides[i] = strides[i].get<int64_t>();
        numel *= uint64_t(std::max<int64_t>(b.desc.shape[i], 0));
      }
      uint64_t bytes = numel * uint64_t(htam_dtype_size(b.desc.dtype));
      if (b.offset > sizes_[id] || bytes > sizes_[id] - b.offset) {
        *bad = "tensor outside its buffer";
        return false;
      }
      b.desc.data = static_cast<uint8_t*>(b_->api().buffer_address(b.buffer)) + b.offset;
      out->push_back(b);
    }
    return true;
  }

  BackendInstance* b_;
  htam_device* dev_;
  LocalExec exec_;
  KernelBenchHarness kb_;  // a ModelNew candidate's Python process (kb_candidate.h)
  std::map<uint64_t, htam_buffer*> bufs_;
  std::map<uint64_t, uint64_t> sizes_;
  LocalExecOptions options_;
  std::vector<int> reply_fds_;  // descriptors sent with the reply being built
  uint64_t used_at_start_ = 0;  // device memory in use when the runner began (0: unknown)
};

}  // namespace

Status SendFrameFds(int fd, const json& body, const std::vector<int>& fds) {
  std::string s = body.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > kMaxRunnerFrame) return Status::InvalidArgument("runner frame too large");
  uint32_t n = htonl(uint32_t(s.size()));
  char hdr[4];
  std::memcpy(hdr, &n, 4);
  // The length header carries the descriptors, so they arrive with the frame that names them.
  iovec iov{hdr, 4};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  char cbuf[CMSG_SPACE(sizeof(int) * kMaxFds)];
  if (!fds.empty()) {
    if (fds.size() > kMaxFds) return Status::InvalidArgument("too many descriptors");
    std::memset(cbuf, 0, sizeof cbuf);
    m.msg_control = cbuf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t w;
  do {
    w = sendmsg(fd, &m, MSG_NOSIGNAL);
  } while (w < 0 && errno == EINTR);
  if (w <= 0) return Status::IOError(std::string("runner socket: ") + strerror(errno));
  if (w < 4 && !WriteAll(fd, hdr + w, size_t(4 - w)))
    return Status::IOError("runner socket closed");
  if (!WriteAll(fd, s.data(), s.size())) return Status::IOError("runner socket closed");
  return Status::OK();
}

Result<json> RecvFrameFds(int fd, std::vector<int>* fds) {
  char hdr[4];
  bool eof = false;
  if (!ReadAll(fd, hdr, 4, fds, &eof))
    return eof ? Status::NotFound("runner socket closed") : Status::IOError("runner socket");
  uint32_t n;
  std::memcpy(&n, hdr, 4);
  n = ntohl(n);
  if (n > kMaxRunnerFrame) return Status::Corruption("runner frame too large");
  std::string body(n, '\0');
  if (!ReadAll(fd, body.data(), n, fds, nullptr)) return Status::IOError("runner socket closed");
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption("bad runner frame");
  return j;
}

std::unique_ptr<CandidateExec> MakeLocalExec(BackendInstance* backend, htam_device* device,
                                             LocalExecOptions options) {
  return std::make_unique<LocalExec>(backend, device, options);
}

std::unique_ptr<CandidateExec> MakeRemoteExec(BackendInstance* backend, int fd, int runner_pid,
                                              bool runner_allocates) {
  return std::make_unique<RemoteExec>(backend, fd, runner_pid, runner_allocates);
}

Result<htam_buffer*> CandidateExec::Allocate(htam_device* device, uint64_t bytes) {
  (void)bytes;
  return Status::Internal("no backend to allocate with");
}

int ServeRunner(BackendInstance* backend, htam_device* device, int fd, LocalExecOptions options) {
  RunnerServer s(backend, device, options);
  return s.Loop(fd);
}

}  // namespace htam
