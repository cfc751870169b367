// Hex SHA-256 for the CUDA compile cache, on the hash shared by every backend (backends/common).
#include "backends/cuda/sha256.h"

#include "backends/common/sha256.h"

namespace htam::cuda {

std::string Sha256Hex(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.HexDigest();
}

}  // namespace htam::cuda
