// What the memory's tests share: a temporary directory and quick memory options.
// Thread-safety: test code only.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

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

// The store opened, or nullptr with the failure recorded.
inline std::unique_ptr<Memory> OpenOk(const MemoryOptions& o) {
  auto m = Memory::Open(o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// A task of `category` put into the store; its id, or 0 with the failure recorded.
inline uint64_t PutTestTask(Memory* m, const std::string& name, const std::string& category,
                            const std::string& description, uint64_t flops, uint64_t bytes) {
  fb::TaskT t;
  t.name = name;
  t.category = category;
  t.description = description;
  t.flops = flops;
  t.bytes = bytes;
  auto id = m->PutTask(t);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? *id : 0;
}

// The id of the seeded direction `name`, or 0 with the failure recorded.
inline uint64_t DirId(Memory* m, const std::string& name) {
  auto d = m->FindDirection(name);
  EXPECT_TRUE(d.ok()) << name;
  return d.ok() ? d->id : 0;
}

}  // namespace htam::memory::testing
