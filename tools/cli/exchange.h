// Moving experience between sites: the portable, versioned JSON Lines file of `htam export` and
// `htam import` (docs/cli.md, "export and import"). The records, their origins and the merge
// belong to the memory (daemon/memory/exchange.h); this file is only their text form.
//
// Format (version 1): the first line is the header
//   {"format":"htam-export","version":1,"site":NAME,"store_id":HEX,"schema_version":2,
//    "embedder":{"model":...,"dim":...}}
// then one {"type": T, "record": {...}} per line, T in direction, task, strategy, session,
// transition, candidate, edge (edges are derived: written for readers, recomputed on import);
// sessions and transitions carry "origin": "<store_id>/<id>", the stable key of where they were
// first recorded (kept across re-exports). The last line {"type":"end","counts":{...}} lets a
// reader tell a complete file from a truncated one.
// Thread-safety: plain functions; the store must not be written by anyone else during an import.
#pragma once

#include <istream>
#include <map>
#include <ostream>
#include <string>

#include "base/status.h"
#include "daemon/memory/exchange.h"
#include "tools/cli/records_json.h"

namespace htam::cli {

inline constexpr int kExportVersion = 1;
inline constexpr const char* kExportFormat = "htam-export";

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
struct ImportReport : memory::ImportReport {
  std::string site;  // the export's
};
// Reads an export (rejecting a malformed, truncated or newer one before the store is touched) and
// merges it into the store at store_dir with memory::ImportStore (created when missing). The
// caller holds the data directory's lock (no daemon).
Result<ImportReport> ImportStore(const std::string& store_dir, std::istream& in,
                                 const ImportOptions& o);

}  // namespace htam::cli
