// The body shared by the libFuzzer target and the regression test: one inbound frame through
// htamd's decoder, and, when accepted, through every accessor (object-API unpack) and re-encode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace htam::fuzz {

// Returns 1 when the frame was accepted as a request, 0 otherwise. Must never crash or leak.
int FuzzDecoderOnce(const uint8_t* data, size_t size);

// Well-formed requests of every type (the seed corpus).
std::vector<std::string> SeedRequests();

}  // namespace htam::fuzz
