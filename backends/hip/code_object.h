// Reads what a HIP shared object carries for the GPU: the clang offload bundle(s) in its
// .hip_fatbin section, as bundle ids ("hipv4-amdgcn-amd-amdhsa--gfx90a") and target processors
// ("gfx90a"). Used to check that a compiled candidate holds code for every requested target —
// without the ROCm runtime and on any machine. Thread-safety: stateless functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace htam::hip {

// The bytes of ELF64 section `name` of the file at `path`. NotFound when the section is absent,
// Corruption when the file is not a well-formed little-endian ELF64.
Result<std::string> ReadElfSection(const std::string& path, std::string_view name);

// Bundle ids of every "__CLANG_OFFLOAD_BUNDLE__" bundle in `fatbin`, in order.
Result<std::vector<std::string>> ParseOffloadBundles(std::string_view fatbin);

// The target processor of an AMDGPU bundle id, without features ("gfx90a" from
// "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"); "" for host or non-AMDGPU ids.
std::string BundleTarget(std::string_view bundle_id);

// The AMDGPU target processors a HIP shared object holds code for (from .hip_fatbin).
Result<std::vector<std::string>> CodeObjectTargets(const std::string& so_path);

}  // namespace htam::hip
