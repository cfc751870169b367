// The body shared by the libFuzzer target and the regression test: one inbound frame through
// htamd's decoder, and, when accepted, through every accessor (object-API unpack) and re-encode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace htam::fuzz {

// Returns 1 when the frame was accepted as a request, 0 otherwise. Must never crash or leak.
int FuzzDecoderOnce(const uint8_t* data, size_t size);

// Well-formed requests of every type (the seed corpus).
std::vector<std::string> SeedRequests();

// The ids a structured request may name: real ones (a live daemon's session, direction,
// strategies, jobs), mixed by RandomRequest with unknown ones.
struct KnownIds {
  std::vector<uint64_t> sessions, directions, strategies, jobs;
};

// One structure-aware request: a valid envelope (file identifier, current version) of a random
// request type, every field drawn from hostile values (invalid UTF-8, control characters,
// oversized strings and vectors, NaN, infinities, negative and huge numbers, zero, known and
// unknown ids); with `mutate`, a few of its bytes are then flipped, inserted or deleted.
std::string RandomRequest(std::mt19937_64& rng, const KnownIds& ids, bool mutate);

}  // namespace htam::fuzz
