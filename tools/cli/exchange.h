// Moving experience between sites: a portable, versioned JSON Lines export of a store and its
// merge into another store (docs/cli.md, "export and import").
//
// Format (version 1): the first line is the header
//   {"format":"htam-export","version":1,"site":NAME,"store_id":HEX,"schema_version":2,
//    "embedder":{"model":...,"dim":...}}
// then one {"type": T, "record": {...}} per line, T in direction, task, strategy, session,
// transition, candidate, edge (edges are derived: written for readers, recomputed on import);
// sessions and transitions carry "origin": "<store_id>/<id>", the stable key of where they were
// first recorded (kept across re-exports). The last line {"type":"end","counts":{...}} lets a
// reader tell a complete file from a truncated one.
//
// Import merges: directions by name, tasks by name (baselines united), strategies by direction
// and name or near-duplicate embedding, candidates by content hash, sessions and transitions by
// origin; ids are remapped; statistics, edges and indexes are then rebuilt from the records.
// Importing the same file again changes nothing.
// Thread-safety: plain functions; the store must not be written by anyone else meanwhile.
#pragma once

#include <istream>
#include <map>
#include <ostream>
#include <string>

#include "base/status.h"
#include "tools/cli/records_json.h"

namespace htam::cli {

inline constexpr int kExportVersion = 1;
inline constexpr const char* kExportFormat = "htam-export";
// The CLI's own database in the store: origin keys of imported sessions and transitions.
inline constexpr const char* kOriginsDb = "cli_origins";

struct ExportOptions {
  std::string site;  // "" = the host name
};
// Writes the store at store_dir (read-only; safe while htamd runs). *counts gets lines per type.
Status ExportStore(const std::string& store_dir, const ExportOptions& o, std::ostream& out,
                   std::map<std::string, size_t>* counts);

struct ImportOptions {
  double merge_threshold = 0.85;  // cosine similarity: an imported strategy merges into a local one
  bool dry_run = false;           // parse, check and report; write nothing
};
struct ImportReport {
  std::map<std::string, size_t> added, merged, skipped;  // per type
  std::string site;
  std::vector<std::string> notes;
};
// Merges an export into the store at store_dir (created when missing). The caller holds the data
// directory's lock (no daemon).
Result<ImportReport> ImportStore(const std::string& store_dir, std::istream& in,
                                 const ImportOptions& o);

}  // namespace htam::cli
