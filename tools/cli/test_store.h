// Test fixture: writes a small, deterministic store through the memory library (a seed of every
// direction, three tasks, scripted sessions with mixed outcomes, learned strategies).
#pragma once

#include <string>

#include "base/status.h"

namespace htam::cli::testing {

struct TestStoreOptions {
  int sessions = 6;
  int steps = 5;
  int salt = 0;  // varies summaries and speedups (a "second site")
};

// Creates DATA_DIR/store with tools/cli/testdata/seed_small.json (tests run from the repository
// root). Closes the memory before returning.
Status BuildTestStore(const std::string& data_dir, const TestStoreOptions& o = {});

// Appends `steps` more steps in a new session to an existing store (used by write storms).
Status AppendSession(const std::string& data_dir, int steps, int salt);

}  // namespace htam::cli::testing
