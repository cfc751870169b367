// Memory: opening (meta, migration, seed, indexes), the query API and maintenance. The decision
// path lives in decide.cc, the learning path in learn.cc; all share MemoryImpl (memory_impl.h).
#include <sys/random.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "base/log.h"
#include "daemon/config/config.h"
#include "daemon/config/sections.h"
#include "daemon/memory/codec.h"
#include "daemon/memory/memory_impl.h"
#include "daemon/memory/seed.h"
#include "daemon/memory/session_steps.h"
#include "daemon/memory/stats.h"

namespace htam::memory {

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

namespace {

constexpr size_t kMaxAdvisedSessions = 65536;  // open sessions whose last advice is remembered

// Section memory of a configuration into o (every field but dir).
void ReadMemorySection(const Config& c, MemoryOptions& o) {
  // Every row of the table's section memory onto the field of its name (sections.h types it).
  const config::Memory m = config::Memory::From(c);
#define HTAM_OPTION(section, name, type, def, help) HTAM_READ_##section(name)
#define HTAM_READ_general(name)
#define HTAM_READ_server(name)
#define HTAM_READ_eval(name)
#define HTAM_READ_worker(name)
#define HTAM_READ_pool(name)
#define HTAM_READ_memory(name) o.name = static_cast<decltype(o.name)>(m.name);
#include "daemon/config/options.inc"
#undef HTAM_READ_memory
#undef HTAM_READ_worker
#undef HTAM_READ_pool
#undef HTAM_READ_eval
#undef HTAM_READ_server
#undef HTAM_READ_general
#undef HTAM_OPTION
  // "" = the shipped taxonomy (install prefix), "none" = no seed; anything else is a path.
  o.seed_file = m.seed_file == "none" ? "" : ShippedPath(m.seed_file, "seed_taxonomy.json");
  // Older configurations wrote the option as a boolean: true was the mask, false no mask.
  if (o.bottleneck_mask == "true") o.bottleneck_mask = "hard";
  if (o.bottleneck_mask == "false") o.bottleneck_mask = "off";
}

}  // namespace

MemoryOptions::MemoryOptions() {
  static const Config* const defaults = new Config(Config::Defaults());
  ReadMemorySection(*defaults, *this);
}

MemoryOptions MemoryOptions::FromConfig(const Config& c) {
  MemoryOptions o;
  o.dir = config::General::From(c).data_dir + "/store";
  ReadMemorySection(c, o);
  return o;
}

// ---------------------------------------------------------------- opening

Result<std::unique_ptr<Memory>> Memory::Open(const MemoryOptions& options) {
  std::unique_ptr<MemoryImpl> m(new MemoryImpl(options, /*read_only=*/false));
  HTAM_RETURN_IF_ERROR(m->Init());
  return std::unique_ptr<Memory>(std::move(m));
}

Result<std::unique_ptr<Memory>> Memory::OpenReadOnly(const std::string& dir) {
  MemoryOptions o;
  o.dir = dir;
  o.snapshot_interval_s = 0;
  o.snapshot_every_records = 0;
  std::unique_ptr<MemoryImpl> m(new MemoryImpl(o, /*read_only=*/true));
  HTAM_RETURN_IF_ERROR(m->Init());
  return std::unique_ptr<Memory>(std::move(m));
}

// The table keeps each session's speedups only where the continuation term reads them.
MemoryImpl::MemoryImpl(const MemoryOptions& o, bool read_only)
    : o_(o),
      read_only_(read_only),
      table_(o.continuation_weight != 0),
      retrieval_cache_(static_cast<size_t>(std::max(0, o.retrieval_cache))),
      advice_(kMaxAdvisedSessions),
      deltas_([this](const IndexDelta& d) { ApplyDelta(d); }),
      group_commit_(
          static_cast<size_t>(std::max(1, o.max_group_commit)),
          [this](const std::vector<const Prepared*>& steps) { return CommitGroup(steps); }) {
  std::string name;
  for (char c : o.trusted_clients + ",") {
    if (c != ',') {
      name.push_back(c);
      continue;
    }
    size_t b = name.find_first_not_of(" \t"), e = name.find_last_not_of(" \t");
    if (b != std::string::npos) trusted_clients_.push_back(name.substr(b, e - b + 1));
    name.clear();
  }
}

MemoryImpl::~MemoryImpl() {
  snapshots_.Stop();
  deltas_.Stop();
  if (store_ && !read_only_) {
    deltas_.Drain();
    if (IndexesDirty()) {
      Status s = SnapshotIndexes();
      if (!s.ok()) {
        HTAM_LOG(kWarn, "memory") << "index snapshot at close failed: " << s.ToString();
      }
    }
    if (!o_.sync_commits) (void)store_->Sync();
  }
}

Status MemoryImpl::Init() {
  if (o_.strategy_scope != "all" && o_.strategy_scope != "direction")
    return Status::InvalidArgument("memory.strategy_scope is '" + o_.strategy_scope +
                                   "': expected all or direction");
  if (o_.bottleneck_mask != "hard" && o_.bottleneck_mask != "soft" && o_.bottleneck_mask != "off")
    return Status::InvalidArgument("memory.bottleneck_mask is '" + o_.bottleneck_mask +
                                   "': expected hard, soft or off");
  auto store = Store::Open(o_.dir, o_.map_size_mb, o_.max_map_size_mb, read_only_, o_.sync_commits);
  if (!store.ok()) return store.status().WithContext("opening memory store");
  store_ = std::move(store).value();
  HTAM_RETURN_IF_ERROR(OpenMeta());
  HTAM_RETURN_IF_ERROR(LoadDirections());
  if (!read_only_) {
    HTAM_RETURN_IF_ERROR(EnsureIndexes());
    deltas_.Start();
    opened_ns_ = NowNs();
    // With a record count, the worker looks every second whether the count is reached.
    if (o_.snapshot_interval_s > 0 || o_.snapshot_every_records > 0) {
      const auto interval = std::chrono::seconds(o_.snapshot_interval_s);
      const auto tick = o_.snapshot_every_records > 0 && (o_.snapshot_interval_s <= 0 ||
                                                          interval > std::chrono::seconds(1))
                            ? std::chrono::seconds(1)
                            : interval;
      snapshots_.Start(tick, [this] { SnapshotIfDue(); });
    }
  }
  return Status::OK();
}

// Reads StoreMeta; creates it (and loads the seed) in an empty store, migrates an older one,
// refuses a newer or foreign one.
Status MemoryImpl::OpenMeta() {
  bool have = false, empty = true;
  {
    HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
    std::string_view v;
    Status s = t.Get(Db::kMeta, "store", &v);
    if (s.ok()) {
      HTAM_RETURN_IF_ERROR(Decode(v, &meta_, "store meta").WithContext(o_.dir));
      have = true;
    } else if (!s.IsNotFound()) {
      return s;
    }
    for (Db db : {Db::kDirections, Db::kStrategies, Db::kTransitions, Db::kTasks, Db::kSessions}) {
      size_t n = 0;
      HTAM_RETURN_IF_ERROR(t.Count(db, &n));
      if (n) empty = false;
    }
  }
  if (!have) {
    if (!empty)
      return Status::FailedPrecondition("store at " + o_.dir +
                                        " holds records but no htam store metadata: refusing a "
                                        "foreign or damaged store");
    if (read_only_) return Status::FailedPrecondition("store at " + o_.dir + " is not initialized");
    return CreateStore();
  }
  if (meta_.magic != kStoreMagic)
    return Status::FailedPrecondition("store at " + o_.dir + " is not an htam store (magic '" +
                                      meta_.magic + "')");
  if (meta_.schema_version > kStoreSchemaVersion)
    return Status::FailedPrecondition(
        "store at " + o_.dir + " has schema version " + std::to_string(meta_.schema_version) +
        ", newer than this htam (" + std::to_string(kStoreSchemaVersion) + ", written by htam " +
        meta_.writer_version + "): upgrade htam to open it");
  if (meta_.schema_version < kStoreSchemaVersion) {
    if (read_only_)
      return Status::FailedPrecondition(
          "store at " + o_.dir + " has schema version " + std::to_string(meta_.schema_version) +
          " and needs migration to " + std::to_string(kStoreSchemaVersion) +
          ": open it once read-write (htamd) to migrate");
    HTAM_RETURN_IF_ERROR(Migrate());
  }
  if (read_only_) {
    o_.embedder = meta_.embedder_model;
    o_.embedder_dim = meta_.embedder_dim;
  } else if (meta_.embedder_model != o_.embedder || meta_.embedder_dim != o_.embedder_dim) {
    return Status::FailedPrecondition(
        "store at " + o_.dir + " was declared with embedder " + meta_.embedder_model + " (dim " +
        std::to_string(meta_.embedder_dim) + "), the configuration asks for " + o_.embedder +
        " (dim " + std::to_string(o_.embedder_dim) + "): embeddings are never mixed");
  }
  return Status::OK();
}

Status MemoryImpl::CreateStore() {
  if (o_.embedder.empty() || o_.embedder_dim == 0 || o_.embedder_dim > 65536)
    return Status::InvalidArgument(
        "memory.embedder must name a model and memory.embedder_dim be 1..65536");
  std::vector<SeedDirection> seed;
  if (!o_.seed_file.empty()) {
    auto loaded = LoadSeedFile(o_.seed_file);
    if (!loaded.ok()) return loaded.status().WithContext("loading the seed taxonomy");
    seed = std::move(loaded).value();
  }
  meta_ = fb::StoreMetaT();
  meta_.magic = kStoreMagic;
  meta_.schema_version = kStoreSchemaVersion;
  meta_.embedder_model = o_.embedder;
  meta_.embedder_dim = o_.embedder_dim;
  meta_.created_ns = NowNs();
  meta_.writer_version = HTAM_VERSION;
  bool builtin = o_.embedder == kBuiltinEmbedder;
  // Embeddings are computed before the transaction (which may be re-run after map growth).
  for (auto& sd : seed)
    for (auto& s : sd.strategies)
      if (builtin) s.embedding = EmbedText(StrategyText(s), o_.embedder_dim);
  size_t strategies = 0;
  HTAM_RETURN_IF_ERROR(store_->Write([&](Txn& t) -> Status {
    HTAM_RETURN_IF_ERROR(t.Put(Db::kMeta, "store", Encode(meta_)));
    uint64_t next_dir = 1, next_strategy = 1;
    strategies = 0;
    for (const auto& sd : seed) {
      fb::DirectionT d = sd.direction;
      d.id = next_dir++;
      d.created_ns = meta_.created_ns;
      HTAM_RETURN_IF_ERROR(t.Put(Db::kDirections, KeyU64(d.id), Encode(d)));
      HTAM_RETURN_IF_ERROR(t.Put(Db::kDirectionNames, d.name, KeyU64(d.id)));
      for (fb::StrategyT s : sd.strategies) {
        s.id = next_strategy++;
        s.direction_id = d.id;
        s.created_ns = s.updated_ns = meta_.created_ns;
        HTAM_RETURN_IF_ERROR(t.Put(Db::kStrategies, KeyU64(s.id), Encode(s)));
        HTAM_RETURN_IF_ERROR(t.Put(Db::kDirectionStrategies, KeyPair(d.id, s.id), ""));
        ++strategies;
      }
    }
    return Status::OK();
  }));
  HTAM_LOG(kInfo, "memory") << "created store at " << o_.dir << " (schema " << kStoreSchemaVersion
                            << ", embedder " << o_.embedder << "/" << o_.embedder_dim
                            << "), seeded " << seed.size() << " directions and " << strategies
                            << " strategies";
  return Status::OK();
}

// Version 1 stores have records only; version 2 adds the secondary-index databases; version 3
// the strategies' verified statistics (both rebuilt from the records); version 4 the sessions'
// step rows (moved out of the session records). A backup copy of the old store is written first.
Status MemoryImpl::Migrate() {
  uint32_t from = meta_.schema_version;
  if (from < 1)
    return Status::FailedPrecondition("store at " + o_.dir + " has unknown schema version " +
                                      std::to_string(from));
  std::string backup = o_.dir + "/backup-v" + std::to_string(from) + "-" + std::to_string(NowNs());
  std::error_code ec;
  std::filesystem::create_directories(backup, ec);
  if (ec) return Status::IOError("creating migration backup " + backup + ": " + ec.message());
  HTAM_RETURN_IF_ERROR(store_->Backup(backup).WithContext("backup before migration"));
  HTAM_LOG(kInfo, "memory") << "migrating store " << o_.dir << " from schema " << from << " to "
                            << kStoreSchemaVersion << " (backup in " << backup << ")";
  HTAM_RETURN_IF_ERROR(store_->Write([&](Txn& t) -> Status {
    if (from < 3) {
      HTAM_RETURN_IF_ERROR(RebuildSecondary(t));
      // Version 3 adds the strategies' verified statistics: folded from the records.
      HTAM_RETURN_IF_ERROR(WriteDerived(t));
    }
    // Version 4 keeps a session's per-step lists as rows of their own.
    HTAM_RETURN_IF_ERROR(MoveSessionListsToRows(t));
    fb::StoreMetaT m = meta_;
    m.schema_version = kStoreSchemaVersion;
    m.writer_version = HTAM_VERSION;
    return t.Put(Db::kMeta, "store", Encode(m));
  }));
  meta_.schema_version = kStoreSchemaVersion;
  meta_.writer_version = HTAM_VERSION;
  return Status::OK();
}

Status MemoryImpl::MoveSessionListsToRows(Txn& t) {
  std::vector<fb::SessionT> listed;
  Status inner;
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kSessions, "", [&](std::string_view, std::string_view v) {
    FbView<fb::Session> s(v);
    if (!s) {
      inner = Status::Corruption("malformed session record in the store");
      return false;
    }
    if ((s->history() && s->history()->size()) || (s->last_status() && s->last_status()->size()) ||
        (s->path_steps() && s->path_steps()->size())) {
      listed.emplace_back();
      s->UnPackTo(&listed.back());
    }
    return true;
  }));
  HTAM_RETURN_IF_ERROR(inner);
  for (auto& s : listed) HTAM_RETURN_IF_ERROR(PutSessionMovingSteps(t, std::move(s)));
  return Status::OK();
}

Status MemoryImpl::RebuildSecondary(Txn& t) {
  for (Db db : {Db::kTaskSessions, Db::kSessionTransitions, Db::kDirectionStrategies,
                Db::kDirectionNames, Db::kTaskNames})
    HTAM_RETURN_IF_ERROR(t.Clear(db));
  Status inner;
  auto fail = [&](Status s) {
    inner = s;
    return false;
  };
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kSessions, "", [&](std::string_view, std::string_view v) {
    FbView<fb::Session> s(v);
    if (!s) return fail(Status::Corruption("malformed session record"));
    Status st = t.Put(Db::kTaskSessions, KeyPair(s->task_id(), s->id()), "");
    return st.ok() ? true : fail(st);
  }));
  HTAM_RETURN_IF_ERROR(inner);
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kTransitions, "", [&](std::string_view, std::string_view v) {
    FbView<fb::TransitionRecord> r(v);
    if (!r) return fail(Status::Corruption("malformed transition record"));
    Status st = t.Put(Db::kSessionTransitions, KeyPair(r->session_id(), r->id()), "");
    return st.ok() ? true : fail(st);
  }));
  HTAM_RETURN_IF_ERROR(inner);
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kStrategies, "", [&](std::string_view, std::string_view v) {
    FbView<fb::Strategy> s(v);
    if (!s) return fail(Status::Corruption("malformed strategy record"));
    Status st = t.Put(Db::kDirectionStrategies, KeyPair(s->direction_id(), s->id()), "");
    return st.ok() ? true : fail(st);
  }));
  HTAM_RETURN_IF_ERROR(inner);
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kDirections, "", [&](std::string_view, std::string_view v) {
    FbView<fb::Direction> d(v);
    if (!d || !d->name()) return fail(Status::Corruption("malformed direction record"));
    Status st = t.Put(Db::kDirectionNames, d->name()->string_view(), KeyU64(d->id()));
    return st.ok() ? true : fail(st);
  }));
  HTAM_RETURN_IF_ERROR(inner);
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kTasks, "", [&](std::string_view, std::string_view v) {
    FbView<fb::Task> k(v);
    if (!k || !k->name()) return fail(Status::Corruption("malformed task record"));
    Status st = t.Put(Db::kTaskNames, k->name()->string_view(), KeyU64(k->id()));
    return st.ok() ? true : fail(st);
  }));
  return inner;
}

Status MemoryImpl::LoadDirections() {
  HTAM_ASSIGN_OR_RETURN(auto dirs, ListDirections());
  directions_.Replace(std::move(dirs));
  return Status::OK();
}

std::string StrategyText(const fb::StrategyT& s) {
  return s.title + ". " + s.description + " " + s.name;
}

// ---------------------------------------------------------------- tasks and sessions

Result<uint64_t> MemoryImpl::PutTask(const fb::TaskT& task) {
  if (task.name.empty()) return Status::InvalidArgument("a task needs a name");
  uint64_t id = 0;
  HTAM_RETURN_IF_ERROR(store_->Write([&](Txn& t) -> Status {
    std::string_view v;
    fb::TaskT rec = task;
    Status s = t.Get(Db::kTaskNames, task.name, &v);
    if (s.ok()) {
      id = DecodeU64(v);
      std::string_view old;
      fb::TaskT prev;
      if (t.Get(Db::kTasks, KeyU64(id), &old).ok() && Decode(old, &prev, "task").ok())
        rec.created_ns = prev.created_ns;
    } else if (s.IsNotFound()) {
      HTAM_ASSIGN_OR_RETURN(id, t.NextId(Db::kTasks));
      rec.created_ns = NowNs();
      HTAM_RETURN_IF_ERROR(t.Put(Db::kTaskNames, task.name, KeyU64(id)));
    } else {
      return s;
    }
    rec.id = id;
    return t.Put(Db::kTasks, KeyU64(id), Encode(rec));
  }));
  return id;
}

template <typename T>
Result<T> MemoryImpl::GetRecord(Db db, std::string_view key, const char* what) {
  HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
  std::string_view v;
  Status s = t.Get(db, key, &v);
  if (s.IsNotFound()) return Status::NotFound(std::string("no such ") + what);
  HTAM_RETURN_IF_ERROR(s);
  T out;
  HTAM_RETURN_IF_ERROR(Decode(v, &out, what));
  return out;
}

Result<fb::TaskT> MemoryImpl::GetTask(uint64_t id) {
  auto r = GetRecord<fb::TaskT>(Db::kTasks, KeyU64(id), "task");
  if (r.status().IsNotFound()) return Status::NotFound("no such task " + std::to_string(id));
  return r;
}

Result<fb::TaskT> MemoryImpl::FindTask(std::string_view name) {
  uint64_t id = 0;
  {
    HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
    std::string_view v;
    Status s = t.Get(Db::kTaskNames, name, &v);
    if (s.IsNotFound()) return Status::NotFound("no task named " + std::string(name));
    HTAM_RETURN_IF_ERROR(s);
    id = DecodeU64(v);
  }
  return GetTask(id);
}

template <typename T>
Result<std::vector<T>> MemoryImpl::ScanAll(Db db, size_t limit, bool newest_first) {
  HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
  std::vector<T> out;
  Status inner;
  auto fn = [&](std::string_view, std::string_view v) {
    T rec;
    inner = Decode(v, &rec, DbName(db));
    if (!inner.ok()) return false;
    out.push_back(std::move(rec));
    return limit == 0 || out.size() < limit;
  };
  HTAM_RETURN_IF_ERROR(newest_first ? t.ScanReverse(db, fn) : t.Scan(db, "", fn));
  HTAM_RETURN_IF_ERROR(inner);
  return out;
}

Result<std::vector<fb::TaskT>> MemoryImpl::ListTasks() {
  return ScanAll<fb::TaskT>(Db::kTasks, 0, false);
}

namespace {

// A session id that cannot be guessed from another: the low 32 bits random, the high bits one
// past the newest session's, so that ids still sort by age (and stay below 2^53 for clients that
// read JSON numbers as doubles, until 2 million sessions).
Result<uint64_t> UnguessableSessionId(Txn& t) {
  HTAM_ASSIGN_OR_RETURN(uint64_t next, t.NextId(Db::kSessions));
  const uint64_t seq = ((next - 1) >> 32) + 1;
  uint32_t low = 0;
  while (low == 0) {
    if (getrandom(&low, sizeof low, 0) != static_cast<ssize_t>(sizeof low))
      return Status::Internal("getrandom failed for a session id");
  }
  return (seq << 32) | low;
}

}  // namespace

Result<fb::SessionT> MemoryImpl::OpenSession(uint64_t task_id, std::string_view backend,
                                             std::string_view arch, std::string_view client,
                                             std::string_view model, uint32_t budget,
                                             std::string_view owner) {
  fb::SessionT s;
  HTAM_RETURN_IF_ERROR(store_->Write([&](Txn& t) -> Status {
    std::string_view v;
    Status st = t.Get(Db::kTasks, KeyU64(task_id), &v);
    if (st.IsNotFound()) return Status::NotFound("no such task " + std::to_string(task_id));
    HTAM_RETURN_IF_ERROR(st);
    FbView<fb::Task> task(v);
    if (!task) return Status::Corruption("malformed task record");
    s = fb::SessionT();
    if (o_.unguessable_session_ids) {
      HTAM_ASSIGN_OR_RETURN(s.id, UnguessableSessionId(t));
    } else {
      HTAM_ASSIGN_OR_RETURN(s.id, t.NextId(Db::kSessions));
    }
    s.task_id = task_id;
    s.owner = owner;
    s.task_name = task->name() ? task->name()->str() : "";
    s.backend = backend;
    s.arch = arch;
    s.client = client;
    s.model = model;
    s.budget = budget;
    s.state = fb::SessionState::Open;
    s.best_speedup = 1.0f;
    s.created_ns = s.updated_ns = NowNs();
    HTAM_RETURN_IF_ERROR(t.Put(Db::kSessions, KeyU64(s.id), Encode(s)));
    return t.Put(Db::kTaskSessions, KeyPair(task_id, s.id), "");
  }));
  return s;
}

Result<fb::SessionT> MemoryImpl::GetSession(uint64_t id, bool with_steps) {
  HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
  std::string_view v;
  Status st = t.Get(Db::kSessions, KeyU64(id), &v);
  if (st.IsNotFound()) return Status::NotFound("no such session " + std::to_string(id));
  HTAM_RETURN_IF_ERROR(st);
  fb::SessionT s;
  HTAM_RETURN_IF_ERROR(Decode(v, &s, "session"));
  if (with_steps) HTAM_RETURN_IF_ERROR(LoadSessionSteps(t, &s));
  return s;
}

Result<fb::SessionT> MemoryImpl::CloseSession(uint64_t id) {
  fb::SessionT s;
  HTAM_RETURN_IF_ERROR(store_->Write([&](Txn& t) -> Status {
    std::string_view v;
    Status st = t.Get(Db::kSessions, KeyU64(id), &v);
    if (st.IsNotFound()) return Status::NotFound("no such session " + std::to_string(id));
    HTAM_RETURN_IF_ERROR(st);
    s = fb::SessionT();
    HTAM_RETURN_IF_ERROR(Decode(v, &s, "session"));
    if (s.state == fb::SessionState::Closed) return LoadSessionSteps(t, &s);
    s.state = fb::SessionState::Closed;
    s.updated_ns = NowNs();
    HTAM_RETURN_IF_ERROR(t.Put(Db::kSessions, KeyU64(id), Encode(s)));
    return LoadSessionSteps(t, &s);
  }));
  advice_.Forget(id);
  return s;
}

Result<std::vector<fb::SessionT>> MemoryImpl::ListSessions(uint64_t task_id, size_t limit) {
  HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
  std::vector<fb::SessionT> out;
  Status inner;
  auto add = [&](std::string_view v) {
    fb::SessionT s;
    inner = Decode(v, &s, "session");
    if (inner.ok()) inner = LoadSessionSteps(t, &s);
    if (inner.ok()) out.push_back(std::move(s));
    return inner.ok() && (limit == 0 || out.size() < limit);
  };
  if (task_id == 0) {
    HTAM_RETURN_IF_ERROR(t.ScanReverse(
        Db::kSessions, [&](std::string_view, std::string_view v) { return add(v); }));
  } else {
    HTAM_RETURN_IF_ERROR(
        t.Scan(Db::kTaskSessions, KeyU64(task_id), [&](std::string_view k, std::string_view) {
          std::string_view v;
          inner = t.Get(Db::kSessions, KeyU64(DecodeU64(k, 8)), &v);
          return inner.ok() && add(v);
        }));
  }
  HTAM_RETURN_IF_ERROR(inner);
  return out;
}

// ---------------------------------------------------------------- queries

Result<std::vector<fb::DirectionT>> MemoryImpl::ListDirections() {
  return ScanAll<fb::DirectionT>(Db::kDirections, 0, false);
}

Result<fb::DirectionT> MemoryImpl::GetDirection(uint64_t id) {
  auto r = GetRecord<fb::DirectionT>(Db::kDirections, KeyU64(id), "direction");
  if (r.status().IsNotFound()) return Status::NotFound("no such direction " + std::to_string(id));
  return r;
}

Result<fb::DirectionT> MemoryImpl::FindDirection(std::string_view name) {
  uint64_t id = 0;
  {
    HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
    std::string_view v;
    Status s = t.Get(Db::kDirectionNames, name, &v);
    if (s.IsNotFound()) return Status::NotFound("no direction named " + std::string(name));
    HTAM_RETURN_IF_ERROR(s);
    id = DecodeU64(v);
  }
  return GetDirection(id);
}

Result<std::vector<fb::StrategyT>> MemoryImpl::ListStrategies(const StrategyFilter& f) {
  HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
  std::vector<fb::StrategyT> out;
  Status inner;
  auto take = [&](std::string_view v) {
    FbView<fb::Strategy> s(v);
    if (!s) {
      inner = Status::Corruption("malformed strategy record");
      return false;
    }
    if (s->merged_into() && !f.include_merged) return true;
    if (!f.backend.empty() && s->backends() && s->backends()->size() > 0) {
      bool ok = false;
      for (auto b : *s->backends()) ok = ok || b->string_view() == f.backend;
      if (!ok) return true;
    }
    fb::StrategyT st;
    s->UnPackTo(&st);
    out.push_back(std::move(st));
    return f.limit == 0 || out.size() < f.limit;
  };
  if (f.direction_id == 0) {
    HTAM_RETURN_IF_ERROR(
        t.Scan(Db::kStrategies, "", [&](std::string_view, std::string_view v) { return take(v); }));
  } else {
    HTAM_RETURN_IF_ERROR(t.Scan(Db::kDirectionStrategies, KeyU64(f.direction_id),
                                [&](std::string_view k, std::string_view) {
                                  std::string_view v;
                                  inner = t.Get(Db::kStrategies, KeyU64(DecodeU64(k, 8)), &v);
                                  return inner.ok() && take(v);
                                }));
  }
  HTAM_RETURN_IF_ERROR(inner);
  return out;
}

Result<fb::StrategyT> MemoryImpl::GetStrategy(uint64_t id) {
  auto r = GetRecord<fb::StrategyT>(Db::kStrategies, KeyU64(id), "strategy");
  if (r.status().IsNotFound()) return Status::NotFound("no such strategy " + std::to_string(id));
  return r;
}

Result<std::vector<fb::TransitionRecordT>> MemoryImpl::ListTransitions(uint64_t session_id,
                                                                       size_t limit) {
  if (session_id == 0) return ScanAll<fb::TransitionRecordT>(Db::kTransitions, limit, true);
  HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
  std::vector<fb::TransitionRecordT> out;
  Status inner;
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kSessionTransitions, KeyU64(session_id),
                              [&](std::string_view k, std::string_view) {
                                std::string_view v;
                                inner = t.Get(Db::kTransitions, KeyU64(DecodeU64(k, 8)), &v);
                                if (inner.ok()) {
                                  fb::TransitionRecordT r;
                                  inner = Decode(v, &r, "transition");
                                  out.push_back(std::move(r));
                                }
                                return inner.ok() && (limit == 0 || out.size() < limit);
                              }));
  HTAM_RETURN_IF_ERROR(inner);
  return out;
}

Result<fb::TransitionRecordT> MemoryImpl::GetTransition(uint64_t id) {
  auto r = GetRecord<fb::TransitionRecordT>(Db::kTransitions, KeyU64(id), "transition");
  if (r.status().IsNotFound()) return Status::NotFound("no such transition " + std::to_string(id));
  return r;
}

Result<fb::CandidateT> MemoryImpl::GetCandidate(std::string_view hash) {
  auto r = GetRecord<fb::CandidateT>(Db::kCandidates, hash, "candidate");
  if (r.status().IsNotFound()) return Status::NotFound("no candidate " + std::string(hash));
  return r;
}

Result<std::vector<fb::TransitionEdgeT>> MemoryImpl::ListEdges(uint64_t from_direction) {
  HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
  std::vector<fb::TransitionEdgeT> out;
  Status inner;
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kEdges, from_direction ? KeyU64(from_direction) : std::string(),
                              [&](std::string_view, std::string_view v) {
                                fb::TransitionEdgeT e;
                                inner = Decode(v, &e, "edge");
                                out.push_back(std::move(e));
                                return inner.ok();
                              }));
  HTAM_RETURN_IF_ERROR(inner);
  return out;
}

Result<fb::StoreMetaT> MemoryImpl::GetMeta() {
  return meta_;
}

Status MemoryImpl::Sync() {
  WaitApplied();  // and every committed step is in the indexes
  return store_->Sync();
}

// ---------------------------------------------------------------- status

std::string MemoryImpl::StatusText() {
  std::ostringstream o;
  o << "# memory\n";
  o << "store_dir: " << o_.dir << "\n";
  o << "schema_version: " << meta_.schema_version << "\n";
  o << "read_only: " << (read_only_ ? 1 : 0) << "\n";
  o << "embedder: " << meta_.embedder_model << "\n";
  o << "embedder_dim: " << meta_.embedder_dim << "\n";
  auto t = store_->BeginRead();
  if (t.ok()) {
    for (Db db : {Db::kDirections, Db::kStrategies, Db::kTransitions, Db::kEdges, Db::kTasks,
                  Db::kSessions, Db::kCandidates}) {
      size_t n = 0;
      if (t->Count(db, &n).ok()) o << DbName(db) << ": " << n << "\n";
    }
  }
  o << "store_file_bytes: " << store_->file_size() << "\n";
  o << "map_bytes: " << store_->map_size() << "\n";
  o << "map_grows: " << store_->grow_count() << "\n";
  {
    ReaderMutexLock l(&index_mu_);
    size_t strat = 0;
    for (const auto& [d, idx] : strategy_index_) strat += idx->size();
    o << "transition_index_size: " << (transition_index_ ? transition_index_->size() : 0) << "\n";
    o << "strategy_index_size: " << strat << "\n";
    o << "retrieval_cache_hits: " << retrieval_cache_.hits() << "\n";
    o << "retrieval_cache_misses: " << retrieval_cache_.misses() << "\n";
    o << "index_source: " << index_source_ << "\n";
    o << "transition_table_rows: " << table_.rows() << "\n";
    o << "transition_table_bytes: " << table_.bytes() << "\n";
    o << "transition_table_source: " << table_source_ << "\n";
    o << "transitions_since_snapshot: " << (transitions_covered_ - snap_transitions_) << "\n";
    o << "strategies_since_snapshot: " << (strategies_covered_ - snap_strategies_) << "\n";
    o << "last_snapshot_age_s: ";
    if (last_snapshot_ns_)
      o << (NowNs() - last_snapshot_ns_) / 1000000000ull;
    else
      o << -1;
    o << "\n";
  }
  o << "group_commits: " << group_commits_.load() << "\n";
  o << "steps_recorded: " << steps_recorded_.load() << "\n";
  return o.str();
}

}  // namespace htam::memory
