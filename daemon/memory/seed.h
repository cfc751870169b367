// The seed taxonomy (configs/seed_taxonomy.json): directions and their local strategies, loaded
// once into an empty store. The file is checked where it enters; a bad one is a clear error.
// Thread-safety: pure function.
#pragma once

#include <string>
#include <vector>

#include "daemon/memory/memory.h"

namespace htam::memory {

struct SeedDirection {
  fb::DirectionT direction;               // id 0: assigned when stored
  std::vector<fb::StrategyT> strategies;  // direction_id 0: set when stored
};

// The 13 direction slugs every seed file must define (the project's shared contract).
const std::vector<std::string>& SeedDirectionSlugs();

Result<std::vector<SeedDirection>> LoadSeedFile(const std::string& path);
Result<std::vector<SeedDirection>> ParseSeed(const std::string& json_text,
                                             const std::string& origin);

// "memory" -> Bottleneck::Memory; false for an unknown word.
bool ParseBottleneck(const std::string& word, fb::Bottleneck* out);

}  // namespace htam::memory
