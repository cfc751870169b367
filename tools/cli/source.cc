// The two sources of the CLI: the store (Memory::OpenReadOnly) and a daemon (htam::Client).
#include "tools/cli/source.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "daemon/config/config.h"
#include "daemon/memory/store_file.h"
#include "htam/client.h"

namespace htam::cli {
namespace {

class LocalSource final : public Source {
 public:
  LocalSource(std::string dir, std::unique_ptr<memory::Memory> m)
      : dir_(std::move(dir)), m_(std::move(m)) {}
  std::string where() const override { return "store " + dir_; }
  bool remote() const override { return false; }
  memory::Memory* local() override { return m_.get(); }

  Result<std::string> StatusText() override { return m_->StatusText(); }
  Result<std::vector<fb::DirectionT>> Directions() override { return m_->ListDirections(); }
  Result<std::vector<fb::TransitionEdgeT>> Edges() override { return m_->ListEdges(0); }
  Result<std::vector<fb::StrategyT>> Strategies(uint64_t direction, const std::string& backend,
                                                bool include_merged) override {
    memory::StrategyFilter f;
    f.direction_id = direction;
    f.backend = backend;
    f.include_merged = include_merged;
    return m_->ListStrategies(f);
  }
  Result<std::vector<fb::TaskT>> Tasks() override { return m_->ListTasks(); }
  Result<std::vector<fb::SessionT>> Sessions() override { return m_->ListSessions(0, 0); }
  Result<std::vector<fb::TransitionRecordT>> Transitions(uint64_t session) override {
    return m_->ListTransitions(session, 0);
  }
  Result<fb::DirectionT> Direction(uint64_t id) override { return m_->GetDirection(id); }
  Result<fb::StrategyT> Strategy(uint64_t id) override { return m_->GetStrategy(id); }
  Result<fb::TransitionRecordT> Transition(uint64_t id) override { return m_->GetTransition(id); }
  Result<fb::SessionT> Session(uint64_t id) override { return m_->GetSession(id); }
  Result<fb::TaskT> Task(uint64_t id) override { return m_->GetTask(id); }
  Result<fb::CandidateT> Candidate(const std::string& hash) override {
    return m_->GetCandidate(hash);
  }

 private:
  std::string dir_;
  std::unique_ptr<memory::Memory> m_;
};

template <typename T>
std::vector<T> Unbox(std::vector<std::unique_ptr<T>>& v) {
  std::vector<T> out;
  out.reserve(v.size());
  for (auto& p : v)
    if (p) out.push_back(std::move(*p));
  return out;
}

class RemoteSource final : public Source {
 public:
  RemoteSource(std::string endpoint, std::unique_ptr<Client> c)
      : endpoint_(std::move(endpoint)), c_(std::move(c)) {}
  std::string where() const override { return "daemon " + endpoint_; }
  bool remote() const override { return true; }

  Result<std::string> StatusText() override { return c_->ServerStatus(""); }
  Result<std::vector<fb::DirectionT>> Directions() override {
    HTAM_ASSIGN_OR_RETURN(auto r, Ask(fb::QueryKind::Directions));
    return Unbox(r.directions);
  }
  Result<std::vector<fb::TransitionEdgeT>> Edges() override {
    HTAM_ASSIGN_OR_RETURN(auto r, Ask(fb::QueryKind::Edges));
    return Unbox(r.edges);
  }
  Result<std::vector<fb::StrategyT>> Strategies(uint64_t direction, const std::string& backend,
                                                bool include_merged) override {
    HTAM_ASSIGN_OR_RETURN(auto r, Ask(fb::QueryKind::Strategies, 0, [&](fb::QueryT& q) {
                            q.direction_id = direction;
                            q.backend = backend;
                          }));
    auto v = Unbox(r.strategies);
    if (!include_merged)
      std::erase_if(v, [](const fb::StrategyT& s) { return s.merged_into != 0; });
    return v;
  }
  Result<std::vector<fb::TaskT>> Tasks() override {
    HTAM_ASSIGN_OR_RETURN(auto r, Ask(fb::QueryKind::Tasks));
    return Unbox(r.tasks);
  }
  Result<std::vector<fb::SessionT>> Sessions() override {
    HTAM_ASSIGN_OR_RETURN(auto r, Ask(fb::QueryKind::Sessions));
    return Unbox(r.sessions);
  }
  Result<std::vector<fb::TransitionRecordT>> Transitions(uint64_t session) override {
    HTAM_ASSIGN_OR_RETURN(
        auto r, Ask(fb::QueryKind::Transitions, 0, [&](fb::QueryT& q) { q.session_id = session; }));
    return Unbox(r.transitions);
  }
  Result<fb::DirectionT> Direction(uint64_t id) override {
    HTAM_ASSIGN_OR_RETURN(auto r, Ask(fb::QueryKind::Directions, id));
    return One(r.directions, "direction", id);
  }
  Result<fb::StrategyT> Strategy(uint64_t id) override {
    HTAM_ASSIGN_OR_RETURN(auto r, Ask(fb::QueryKind::Strategies, id));
    return One(r.strategies, "strategy", id);
  }
  Result<fb::TransitionRecordT> Transition(uint64_t id) override {
    HTAM_ASSIGN_OR_RETURN(auto r, Ask(fb::QueryKind::Transitions, id));
    return One(r.transitions, "transition", id);
  }
  Result<fb::SessionT> Session(uint64_t id) override {
    HTAM_ASSIGN_OR_RETURN(auto r, Ask(fb::QueryKind::Sessions, id));
    return One(r.sessions, "session", id);
  }
  Result<fb::TaskT> Task(uint64_t id) override {
    HTAM_ASSIGN_OR_RETURN(auto r, Ask(fb::QueryKind::Tasks, id));
    return One(r.tasks, "task", id);
  }
  Result<fb::CandidateT> Candidate(const std::string&) override {
    return Status::InvalidArgument(
        "the daemon's Query cannot look candidates up by hash: use --data-dir");
  }

 private:
  template <typename F = void (*)(fb::QueryT&)>
  Result<fb::QueryReplyT> Ask(
      fb::QueryKind kind, uint64_t id = 0, F&& fill = [](fb::QueryT&) {}) {
    fb::QueryT q;
    q.kind = kind;
    q.id = id;
    q.limit = 0;  // the daemon's maximum (server.query_limit_max)
    fill(q);
    auto r = c_->Query(q);
    if (!r.ok()) return r.status().WithContext("query to " + endpoint_);
    return r;
  }
  template <typename T>
  static Result<T> One(std::vector<std::unique_ptr<T>>& v, const char* what, uint64_t id) {
    if (v.empty() || !v[0])
      return Status::NotFound(std::string("no such ") + what + " " + std::to_string(id));
    return std::move(*v[0]);
  }
  std::string endpoint_;
  std::unique_ptr<Client> c_;
};

}  // namespace

std::string StoreDir(const std::string& data_dir) {
  // Where the memory library puts the store of a data directory (MemoryOptions::FromConfig).
  Config c = Config::Defaults();
  if (!c.Set("general.data_dir", data_dir).ok()) return data_dir + "/store";
  return memory::MemoryOptions::FromConfig(c).dir;
}

Result<std::unique_ptr<Source>> OpenLocal(const std::string& data_dir) {
  std::string dir = StoreDir(data_dir);
  std::error_code ec;
  if (!std::filesystem::exists(dir + "/data.mdb", ec))
    return Status::NotFound("no htam store at " + dir +
                            " (set --data-dir to htamd's general.data_dir)");
  // Before anything maps the file: a truncated data.mdb would fault on first access.
  auto file = memory::InspectDataFile(dir);
  if (!file.ok()) return file.status();
  auto m = memory::Memory::OpenReadOnly(dir);
  if (!m.ok()) return m.status();
  return std::unique_ptr<Source>(new LocalSource(dir, std::move(m).value()));
}

Result<std::unique_ptr<Source>> OpenRemote(const std::string& endpoint, int timeout_ms,
                                           const std::string& server_key_file,
                                           const std::string& client_key_file) {
  ClientOptions o;
  o.endpoint = endpoint;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  o.connect_timeout = std::chrono::milliseconds(timeout_ms);
  o.retries = 0;
  o.client_name = "htam-cli";
  o.server_public_key_file = server_key_file;
  o.client_key_file = client_key_file;
  auto c = Client::Connect(o);
  if (!c.ok()) return c.status().WithContext("connecting to htamd at " + endpoint);
  return std::unique_ptr<Source>(new RemoteSource(endpoint, std::move(c).value()));
}

}  // namespace htam::cli
