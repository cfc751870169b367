// What the memory's tests share: a temporary directory and quick memory options.
// Thread-safety: test code only.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "daemon/memory/memory.h"

namespace htam::memory::testing {

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/htam-memory-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A small map, no snapshot timer, unsynced commits (durability is proven by tests/fault; closing
// flushes): quick tests.
inline MemoryOptions Opts(const std::string& dir) {
  MemoryOptions o;
  o.dir = dir;
  o.map_size_mb = 16;
  o.snapshot_interval_s = 0;
  o.sync_commits = false;
  return o;
}

}  // namespace htam::memory::testing
