// SHA-256 of byte strings, as lowercase hex: the compile cache key. Candidates are hostile, so the
// key must resist chosen collisions (a weak hash could serve one candidate another's binary).
// Thread-safety: stateless functions.
#pragma once

#include <string>
#include <string_view>

namespace htam::cuda {

std::string Sha256Hex(std::string_view data);

}  // namespace htam::cuda
