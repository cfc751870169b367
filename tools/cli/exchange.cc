// Export and import of the memory as JSON Lines (format in exchange.h), and `htam export|import`.
#include "tools/cli/exchange.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "base/file.h"
#include "daemon/memory/exchange.h"
#include "tools/cli/cli.h"
#include "tools/cli/lock.h"
#include "tools/cli/table.h"

namespace htam::cli {
namespace fs = std::filesystem;

namespace {

std::string HostName() {
  char b[256] = {};
  if (::gethostname(b, sizeof b - 1) != 0 || !b[0]) return "site";
  return b;
}

void Line(std::ostream& out, const char* type, Json record, std::map<std::string, size_t>* counts,
          const std::string& origin = "") {
  Json j{{"type", type}};
  if (!origin.empty()) j["origin"] = origin;
  j["record"] = std::move(record);
  // Invalid UTF-8 from stores written before the door checked it: replaced, never an abort.
  out << j.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  (*counts)[type]++;
}

}  // namespace

// ---------------------------------------------------------------- export

Status ExportStore(const std::string& dir, const ExportOptions& o, std::ostream& out,
                   std::map<std::string, size_t>* counts) {
  HTAM_ASSIGN_OR_RETURN(memory::ExchangeSet set, memory::ExportStore(dir));
  const fb::StoreMetaT& meta = set.meta;
  const std::string site = o.site.empty() ? HostName() : o.site;
  counts->clear();
  out << Json{{"format", kExportFormat},
              {"version", kExportVersion},
              {"site", site},
              {"store_id", set.store_id},
              {"schema_version", meta.schema_version},
              {"embedder", {{"model", meta.embedder_model}, {"dim", meta.embedder_dim}}},
              {"htam_version", HTAM_VERSION}}
             .dump()
      << "\n";
  for (const auto& d : set.directions) Line(out, "direction", ToJson(d), counts);
  for (const auto& t : set.tasks) Line(out, "task", ToJson(t), counts);
  for (const auto& s : set.strategies)
    Line(out, "strategy", ToJson(s, /*with_embedding=*/true), counts);
  for (const auto& s : set.sessions) Line(out, "session", ToJson(s.record), counts, s.origin);
  for (const auto& r : set.transitions)
    Line(out, "transition", ToJson(r.record, /*with_vector=*/true), counts, r.origin);
  for (const auto& c : set.candidates) Line(out, "candidate", ToJson(c), counts);
  for (const auto& e : set.edges) Line(out, "edge", ToJson(e), counts);
  Json jc = Json::object();
  for (const auto& [k, v] : *counts) jc[k] = v;
  out << Json{{"type", "end"}, {"counts", jc}}.dump() << "\n";
  if (!out) return Status::IOError("writing the export failed");
  return Status::OK();
}

// ---------------------------------------------------------------- import: reading

namespace {

struct Item {
  std::string origin;
  Json record;
};

struct ExportFile {
  Json header;
  std::map<std::string, std::vector<Item>> items;  // by type
};

Result<ExportFile> ReadExport(std::istream& in) {
  ExportFile f;
  std::string line;
  size_t n = 0;
  bool ended = false;
  std::map<std::string, size_t> counts;
  static const std::set<std::string> kTypes = {"direction",  "task",      "strategy", "session",
                                               "transition", "candidate", "edge"};
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, false);
    std::string where = "line " + std::to_string(n);
    if (j.is_discarded() || !j.is_object())
      return Status::InvalidArgument(where + " is not a JSON object");
    if (n == 1) {
      if (j.value("format", "") != kExportFormat)
        return Status::InvalidArgument(
            "not an htam export (the first line must be the header "
            "{\"format\":\"htam-export\",...})");
      if (!j.contains("version") || !j["version"].is_number_integer())
        return Status::InvalidArgument("the export header has no version");
      int v = j["version"].get<int>();
      if (v > kExportVersion)
        return Status::FailedPrecondition("export format version " + std::to_string(v) +
                                          " is newer than this htam reads (" +
                                          std::to_string(kExportVersion) + "): upgrade htam");
      if (v < 1)
        return Status::InvalidArgument("export format version " + std::to_string(v) +
                                       " is unknown");
      f.header = j;
      continue;
    }
    if (ended) return Status::InvalidArgument(where + ": data after the end line");
    std::string type = j.value("type", "");
    if (type == "end") {
      ended = true;
      Json want = j.value("counts", Json::object());
      for (const auto& [k, v] : want.items())
        if (!v.is_number_unsigned() || counts[k] != v.get<size_t>())
          return Status::InvalidArgument("the export is inconsistent: its end line counts " +
                                         v.dump() + " " + k + " record(s), the file holds " +
                                         std::to_string(counts[k]));
      continue;
    }
    if (!kTypes.count(type))
      return Status::InvalidArgument(where + ": unknown record type \"" + type + "\"");
    if (!j.contains("record") || !j["record"].is_object())
      return Status::InvalidArgument(where + ": no record");
    Item it;
    it.origin = j.value("origin", "");
    if ((type == "session" || type == "transition") && it.origin.empty())
      return Status::InvalidArgument(where + ": a " + type + " needs an origin");
    it.record = std::move(j["record"]);
    f.items[type].push_back(std::move(it));
    counts[type]++;
  }
  if (n == 0) return Status::InvalidArgument("the export is empty");
  if (!ended) return Status::InvalidArgument("the export is truncated (no end line)");
  return f;
}

// ---------------------------------------------------------------- import

// The records of the file, typed (edges stay text: derived, never imported).
Status ToSet(ExportFile& f, memory::ExchangeSet* set) {
  Json e = f.header.value("embedder", Json::object());
  set->meta.embedder_model = e.value("model", "");
  set->meta.embedder_dim = e.value("dim", 0u);
  for (auto& it : f.items["direction"]) {
    HTAM_RETURN_IF_ERROR(FromJson(it.record, &set->directions.emplace_back()));
  }
  for (auto& it : f.items["task"]) {
    HTAM_RETURN_IF_ERROR(FromJson(it.record, &set->tasks.emplace_back()));
  }
  for (auto& it : f.items["strategy"]) {
    HTAM_RETURN_IF_ERROR(FromJson(it.record, &set->strategies.emplace_back()));
  }
  for (auto& it : f.items["session"]) {
    auto& s = set->sessions.emplace_back();
    s.origin = it.origin;
    HTAM_RETURN_IF_ERROR(FromJson(it.record, &s.record));
  }
  for (auto& it : f.items["transition"]) {
    auto& r = set->transitions.emplace_back();
    r.origin = it.origin;
    HTAM_RETURN_IF_ERROR(FromJson(it.record, &r.record));
  }
  for (auto& it : f.items["candidate"]) {
    HTAM_RETURN_IF_ERROR(FromJson(it.record, &set->candidates.emplace_back()));
  }
  return Status::OK();
}

}  // namespace

Result<ImportReport> ImportStore(const std::string& dir, std::istream& in, const ImportOptions& o) {
  HTAM_ASSIGN_OR_RETURN(ExportFile f, ReadExport(in));
  memory::ExchangeSet set;
  HTAM_RETURN_IF_ERROR(ToSet(f, &set));
  ImportReport rep;
  rep.site = f.header.value("site", "");
  memory::ImportOptions mo;
  mo.merge_threshold = o.merge_threshold;
  mo.dry_run = o.dry_run;
  mo.site = rep.site;
  HTAM_ASSIGN_OR_RETURN(static_cast<memory::ImportReport&>(rep),
                        memory::ImportStore(dir, std::move(set), mo));
  rep.skipped["edge"] = f.items["edge"].size();  // derived: recomputed from the records
  return rep;
}

// ---------------------------------------------------------------- subcommands

int CmdExport(Context& c) {
  po::options_description o("export options");
  std::string out;
  ExportOptions eo;
  o.add_options()("output,o", po::value(&out), "write to this file (default: stdout)")(
      "site", po::value(&eo.site), "name of this site in the export (default: the host name)");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "[-o FILE.jsonl] [--site NAME]", o, {}, &vm, &done);
  if (done) return rc;
  if (!c.g.connect.empty())
    return Fail(c, "export reads the store itself: use --data-dir, not --connect");
  std::string store = StoreDir(c.g.data_dir);
  std::error_code ec;
  if (!fs::exists(store + "/data.mdb", ec)) return Fail(c, "no htam store at " + store);
  std::map<std::string, size_t> counts;
  if (out.empty()) {
    Status s = ExportStore(store, eo, c.out, &counts);
    return s.ok() ? kExitOk : Fail(c, s);
  }
  // Written beside the file and renamed over it: a failed export leaves no half file.
  Status written = PublishFile(out, [&](const std::string& tmp) {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Status::IOError("cannot write " + tmp);
    Status s = ExportStore(store, eo, f, &counts);
    f.flush();
    if (s.ok() && !f) s = Status::IOError("writing " + tmp + " failed");
    return s;
  });
  if (!written.ok()) return Fail(c, written);
  if (c.g.json) {
    Json j = Json::object();
    for (const auto& [k, v] : counts) j[k] = v;
    PrintJson(c, Json{{"file", out}, {"counts", j}});
  } else {
    c.out << "exported to " << out << ":";
    for (const auto& [k, v] : counts)
      c.out << " " << v << " " << (v == 1 ? k : k == "strategy" ? "strategies" : k + "s");
    c.out << "\n";
  }
  return kExitOk;
}

int CmdImport(Context& c) {
  po::options_description o("import options");
  ImportOptions io;
  o.add_options()("merge-threshold",
                  po::value(&io.merge_threshold)->default_value(io.merge_threshold),
                  "cosine similarity above which an imported strategy merges into a local one")(
      "dry-run", po::bool_switch(&io.dry_run), "check and report what would change; write nothing");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "<file.jsonl> [--data-dir DIR] [--dry-run]", o, {{"file", 1}}, &vm, &done);
  if (done) return rc;
  if (!c.g.connect.empty())
    return Fail(c, "import writes the store itself (htamd stopped): use --data-dir, not --connect");
  std::string file = vm["file"].as<std::vector<std::string>>()[0];
  std::ifstream in(file, std::ios::binary);
  if (!in) return Fail(c, "cannot read " + file);
  auto lock = DataDirLock::Acquire(c.g.data_dir);
  if (!lock.ok()) return Fail(c, lock.status().WithContext("import needs htamd stopped"));
  auto rep = ImportStore(StoreDir(c.g.data_dir), in, io);
  if (!rep.ok()) return Fail(c, rep.status().WithContext("importing " + file));
  if (c.g.json) {
    PrintJson(c, Json{{"file", file},
                      {"site", rep->site},
                      {"dry_run", io.dry_run},
                      {"added", rep->added},
                      {"merged", rep->merged},
                      {"skipped", rep->skipped},
                      {"notes", rep->notes}});
    return kExitOk;
  }
  for (const auto& n : rep->notes) c.out << "note: " << n << "\n";
  c.out << (io.dry_run ? "would import " : "imported ") << file << " from site " << rep->site
        << "\n";
  Table t({"kind", ">added", ">merged", ">already here"});
  for (const char* k : {"direction", "task", "strategy", "session", "transition", "candidate"})
    t.Add({k, std::to_string(rep->added[k]), std::to_string(rep->merged[k]),
           std::to_string(rep->skipped[k])});
  t.Print(c.out);
  return kExitOk;
}

}  // namespace htam::cli
