// Safety subcommands: backup (hot, compacted, consistent), restore, check, rebuild.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/file.h"
#include "base/process.h"
#include "daemon/memory/store.h"
#include "daemon/memory/store_file.h"
#include "tools/cli/cli.h"
#include "tools/cli/inspect_util.h"
#include "tools/cli/isolate.h"
#include "tools/cli/lock.h"

namespace htam::cli {
namespace fs = std::filesystem;
namespace {

const char* const kSnapshots[] = {"transitions.idx", "strategies.idx"};

bool EmptyOrMissing(const std::string& dir) {
  std::error_code ec;
  return !fs::exists(dir, ec) || (fs::is_directory(dir, ec) && fs::is_empty(dir, ec));
}

Status CopyFileSynced(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) return Status::IOError("copying " + from + " to " + to + ": " + ec.message());
  return SyncPath(to);
}

// The store directory inside a backup (BACKUP/store) or the backup itself when it is one.
std::string BackupStore(const std::string& backup) {
  std::error_code ec;
  if (fs::exists(backup + "/store/data.mdb", ec)) return backup + "/store";
  return backup;
}

// Runs Memory::Check on a store in a child process, so that a store damaged badly enough to
// crash LMDB (a fault on a wild page) is reported, never crashes the CLI. Returns the problems.
Result<std::vector<std::string>> CheckIsolated(const std::string& store_dir) {
  HTAM_RETURN_IF_ERROR(memory::InspectDataFile(store_dir).status());
  auto run = RunForked([&](std::string* reply) {
    Json out;
    auto m = memory::Memory::OpenReadOnly(store_dir);
    if (!m.ok()) {
      out = Json{{"error", m.status().message()}};
    } else {
      std::vector<std::string> problems;
      Status s = (*m)->Check(&problems);
      if (!s.ok() && problems.empty()) problems.push_back(s.message());
      out = Json{{"problems", problems}};
    }
    *reply = out.dump();
    return 0;
  });
  HTAM_RETURN_IF_ERROR(run.status());
  if (run->signaled)
    return Status::Corruption(
        std::string("the store is damaged: reading it crashed the checker (") +
        strsignal(run->signal) + ")");
  Json j = Json::parse(run->reply, nullptr, false);
  if (j.is_discarded())
    return Status::Corruption("reading the store stopped the checker (exit " +
                              std::to_string(run->exit_code) + "): the store is damaged");
  if (j.contains("error")) return Status::Corruption(j["error"].get<std::string>());
  return j["problems"].get<std::vector<std::string>>();
}

}  // namespace

// ---------------------------------------------------------------- backup

int CmdBackup(Context& c) {
  po::options_description o("backup options");
  bool no_verify = false;
  o.add_options()("no-verify", po::bool_switch(&no_verify), "skip the integrity check of the copy");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "<dest-dir> [--no-verify]", o, {{"dest", 1}}, &vm, &done);
  if (done) return rc;
  if (!c.g.connect.empty())
    return Fail(c, "backup reads the store itself: use --data-dir, not --connect");
  std::string dest = vm["dest"].as<std::vector<std::string>>()[0];
  std::string store = StoreDir(c.g.data_dir);
  std::error_code ec;
  if (!fs::exists(store + "/data.mdb", ec)) return Fail(c, "no htam store at " + store);
  if (!EmptyOrMissing(dest)) return Fail(c, "backup target " + dest + " exists and is not empty");
  auto t0 = std::chrono::steady_clock::now();
  // Written next to the target and renamed into place: a failed backup leaves nothing half-done.
  int snapshots = 0;
  std::vector<std::string> problems;
  Json manifest;
  Status st = PublishDir(dest, [&](const std::string& tmp) -> Status {
    HTAM_RETURN_IF_ERROR(MakeDirs(tmp + "/store", 0755));
    // Snapshots first: they may then lag behind the copied records (the memory catches up on the
    // newer records when it opens) but never run ahead of them.
    for (const char* s : kSnapshots) {
      if (!fs::exists(store + "/" + s, ec)) continue;
      HTAM_RETURN_IF_ERROR(CopyFileSynced(store + "/" + s, tmp + "/store/" + s));
      ++snapshots;
    }
    HTAM_RETURN_IF_ERROR(RunIsolated(
        [&] { return memory::Store::CopyCompact(store, tmp + "/store"); }, "copying " + store));
    HTAM_RETURN_IF_ERROR(SyncPath(tmp + "/store/data.mdb"));
    if (!no_verify) {
      auto p = CheckIsolated(tmp + "/store");
      if (!p.ok()) return p.status().WithContext("the copy does not verify");
      problems = *p;
    }
    auto info = LocalStatus(tmp);  // counts of the copy (tmp is a data dir: tmp/store)
    manifest = Json{{"format", "htam-backup"},
                    {"version", 1},
                    {"source", fs::absolute(store).string()},
                    {"verified", !no_verify},
                    {"problems", problems}};
    if (info.ok()) {
      manifest["schema_version"] = (*info)["store"]["schema_version"];
      manifest["records"] = (*info)["records"];
    }
    HTAM_RETURN_IF_ERROR(WriteTextFile(tmp + "/MANIFEST.json", manifest.dump(2) + "\n"));
    fs::remove(tmp + "/store/lock.mdb", ec);  // left by the verification; not part of a backup
    return Status::OK();
  });
  if (!st.ok()) return Fail(c, st);
  (void)SyncPath(fs::absolute(dest).parent_path().string());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uintmax_t bytes = fs::file_size(dest + "/store/data.mdb", ec);
  if (c.g.json) {
    manifest["dest"] = dest;
    manifest["bytes"] = bytes;
    manifest["seconds"] = secs;
    PrintJson(c, manifest);
  } else {
    c.out << "backup of " << store << " written to " << dest << " (" << bytes << " bytes, "
          << snapshots << " index snapshot(s), "
          << (no_verify          ? "not verified"
              : problems.empty() ? "verified"
                                 : "VERIFY FOUND PROBLEMS")
          << ")\n";
    for (const auto& p : problems) c.out << "  problem: " << p << "\n";
  }
  return problems.empty() ? kExitOk : kExitFail;
}

// ---------------------------------------------------------------- restore

int CmdRestore(Context& c) {
  po::options_description o("restore options");
  bool force = false;
  o.add_options()("force", po::bool_switch(&force),
                  "replace an existing store (it is kept as store.replaced-<time>)");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "<backup-dir> [--data-dir DIR] [--force]", o, {{"backup", 1}}, &vm, &done);
  if (done) return rc;
  if (!c.g.connect.empty())
    return Fail(c, "restore writes the store itself: use --data-dir, not --connect");
  std::string from = BackupStore(vm["backup"].as<std::vector<std::string>>()[0]);
  std::error_code ec;
  if (!fs::exists(from + "/data.mdb", ec))
    return Fail(c, "no backup at " + from + " (expected store/data.mdb)");
  // The backup must be sound before anything is touched.
  auto problems = CheckIsolated(from);
  if (!problems.ok()) return Fail(c, problems.status().WithContext("the backup does not verify"));
  if (!problems->empty())
    return Fail(c, "the backup has " + std::to_string(problems->size()) +
                       " integrity problem(s), first: " + (*problems)[0]);
  std::string pid;
  if (DaemonRunning(c.g.data_dir, &pid))
    return Fail(c, "htamd" + (pid.empty() ? std::string() : " (pid " + pid + ")") +
                       " is running on " + c.g.data_dir + ": stop it before restoring");
  auto lock = DataDirLock::Acquire(c.g.data_dir);  // keeps a daemon from starting meanwhile
  if (!lock.ok()) return Fail(c, lock.status());
  std::string store = StoreDir(c.g.data_dir);
  std::string moved;
  if (!EmptyOrMissing(store)) {
    if (!force) return Fail(c, "target " + store + " is not empty: use --force to replace it");
    moved = store + ".replaced-" +
            std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
    Status aside = MovePath(store, moved);
    if (!aside.ok()) return Fail(c, aside.WithContext("moving the old store aside"));
  }
  fs::remove(store, ec);  // an empty directory, if any
  Status restored = PublishDir(store, [&](const std::string& tmp) -> Status {
    for (const char* f : {"data.mdb", kSnapshots[0], kSnapshots[1]}) {
      if (!fs::exists(from + "/" + f, ec)) continue;
      HTAM_RETURN_IF_ERROR(CopyFileSynced(from + "/" + f, tmp + "/" + f));
    }
    return Status::OK();
  });
  if (!restored.ok()) return Fail(c, restored.WithContext("restoring the store"));
  (void)SyncPath(c.g.data_dir);
  if (c.g.json) {
    PrintJson(c, Json{{"restored", store}, {"from", from}, {"previous_store", moved}});
  } else {
    c.out << "restored " << from << " to " << store << "\n";
    if (!moved.empty()) c.out << "the previous store was kept at " << moved << "\n";
  }
  return kExitOk;
}

// ---------------------------------------------------------------- check

int CmdCheck(Context& c) {
  po::options_description o("check options");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "[--data-dir DIR] [--json]", o, {}, &vm, &done);
  if (done) return rc;
  if (!c.g.connect.empty())
    return Fail(c, "check reads the store itself: use --data-dir, not --connect");
  std::string store = StoreDir(c.g.data_dir);
  std::error_code ec;
  if (!fs::exists(store + "/data.mdb", ec)) return Fail(c, "no htam store at " + store);
  auto problems = CheckIsolated(store);
  std::vector<std::string> list;
  if (!problems.ok())
    list.push_back(problems.status().message());
  else
    list = *problems;
  if (c.g.json) {
    PrintJson(c, Json{{"store", store}, {"ok", list.empty()}, {"problems", list}});
  } else if (list.empty()) {
    c.out << "ok: " << store << " passes every check (indexes, statistics, schema version)\n";
  } else {
    for (const auto& p : list) c.out << "problem: " << p << "\n";
    c.out << list.size() << " problem(s) in " << store << "\n";
  }
  return list.empty() ? kExitOk : kExitFail;
}

// ---------------------------------------------------------------- rebuild

int CmdRebuild(Context& c) {
  po::options_description o("rebuild options");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "[--data-dir DIR]", o, {}, &vm, &done);
  if (done) return rc;
  if (!c.g.connect.empty())
    return Fail(c, "rebuild writes the store itself: use --data-dir, not --connect");
  std::string store = StoreDir(c.g.data_dir);
  std::error_code ec;
  if (!fs::exists(store + "/data.mdb", ec)) return Fail(c, "no htam store at " + store);
  auto lock = DataDirLock::Acquire(c.g.data_dir);
  if (!lock.ok()) return Fail(c, lock.status().WithContext("rebuild needs htamd stopped"));
  auto before = CheckIsolated(store);
  if (!before.ok() && before.status().code() != Status::Code::kCorruption)
    return Fail(c, before.status());
  memory::MemoryOptions mo;
  mo.dir = store;
  mo.seed_file = "";
  mo.snapshot_interval_s = 0;
  {
    auto ro = memory::Memory::OpenReadOnly(store);
    if (!ro.ok()) return Fail(c, ro.status());
    auto meta = (*ro)->GetMeta();
    if (!meta.ok()) return Fail(c, meta.status());
    mo.embedder = meta->embedder_model;
    mo.embedder_dim = meta->embedder_dim;
  }
  {
    auto m = memory::Memory::Open(mo);
    if (!m.ok()) return Fail(c, m.status());
    Status s = (*m)->RebuildDerived();
    if (!s.ok()) return Fail(c, s);
    s = (*m)->SnapshotIndexes();
    if (!s.ok()) return Fail(c, s);
  }
  auto after = CheckIsolated(store);
  if (!after.ok()) return Fail(c, after.status().WithContext("after the rebuild"));
  size_t fixed = before.ok() ? before->size() : 0;
  if (c.g.json) {
    PrintJson(c, Json{{"store", store},
                      {"problems_before", before.ok() ? Json(*before) : Json::array()},
                      {"problems_after", *after}});
  } else {
    c.out << "rebuilt edges, statistics, secondary indexes and vector indexes of " << store
          << " from its records\n";
    if (fixed) c.out << "problems before: " << fixed << ", after: " << after->size() << "\n";
    for (const auto& p : *after) c.out << "problem: " << p << "\n";
  }
  return after->empty() ? kExitOk : kExitFail;
}

}  // namespace htam::cli
