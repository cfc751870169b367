// A look at the store's data.mdb before anything maps it: LMDB faults on a truncated file or a
// damaged meta page, so the CLI (inspect, backup, import) checks the file first.
// Thread-safety: a plain function; reads the file only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace htam::memory {

// What the meta pages of data.mdb say.
struct LmdbFileInfo {
  size_t page_size = 0;
  uint64_t last_page = 0;
  uint64_t txn_id = 0;
  uint64_t file_bytes = 0;
};
// Corruption when the file is not an LMDB file, both meta pages are bad, or the file is shorter
// than the pages the newest meta page uses (truncated); NotFound when there is no data.mdb.
Result<LmdbFileInfo> InspectDataFile(const std::string& store_dir);

}  // namespace htam::memory
