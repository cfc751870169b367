// ELF64 section lookup and clang offload-bundle parsing (format of clang-offload-bundler:
// magic, uint64 entry count, then per entry uint64 offset, uint64 size, uint64 id length, id).
#include "backends/hip/code_object.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

namespace htam::hip {
namespace {

constexpr std::string_view kBundleMagic = "__CLANG_OFFLOAD_BUNDLE__";

template <typename T>
bool Load(std::string_view data, uint64_t off, T* out) {
  if (off > data.size() || sizeof(T) > data.size() - off) return false;
  std::memcpy(out, data.data() + off, sizeof(T));
  return true;
}

}  // namespace

Result<std::string> ReadElfSection(const std::string& path, std::string_view name) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::IOError("cannot open " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string file = ss.str();
  std::string_view d(file);
  if (d.size() < 64 ||
      d.substr(0, 4) !=
          "\x7f"
          "ELF" ||
      d[4] != 2 || d[5] != 1) {
    return Status::Corruption(path + " is not a little-endian ELF64 file");
  }
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0, shstrndx = 0;
  if (!Load(d, 0x28, &shoff) || !Load(d, 0x3a, &shentsize) || !Load(d, 0x3c, &shnum) ||
      !Load(d, 0x3e, &shstrndx) || shentsize < 64 || shstrndx >= shnum) {
    return Status::Corruption(path + ": bad ELF header");
  }
  auto section = [&](uint16_t i, uint32_t* name_off, uint64_t* off, uint64_t* size) {
    uint64_t base = shoff + uint64_t(i) * shentsize;
    return Load(d, base, name_off) && Load(d, base + 0x18, off) && Load(d, base + 0x20, size);
  };
  uint32_t ignored;
  uint64_t str_off = 0, str_size = 0;
  if (!section(shstrndx, &ignored, &str_off, &str_size) || str_off > d.size() ||
      str_size > d.size() - str_off) {
    return Status::Corruption(path + ": bad section-name table");
  }
  for (uint16_t i = 0; i < shnum; ++i) {
    uint32_t n = 0;
    uint64_t off = 0, size = 0;
    if (!section(i, &n, &off, &size)) return Status::Corruption(path + ": truncated section table");
    if (n >= str_size) continue;
    const char* s = d.data() + str_off + n;
    size_t len = strnlen(s, str_size - n);
    if (std::string_view(s, len) != name) continue;
    if (off > d.size() || size > d.size() - off)
      return Status::Corruption(path + ": section out of file");
    return std::string(d.substr(off, size));
  }
  return Status::NotFound(path + " has no section " + std::string(name));
}

Result<std::vector<std::string>> ParseOffloadBundles(std::string_view fatbin) {
  std::vector<std::string> ids;
  size_t pos = fatbin.find(kBundleMagic);
  if (pos == std::string_view::npos) return Status::Corruption("no clang offload bundle found");
  while (pos != std::string_view::npos) {
    std::string_view b = fatbin.substr(pos);
    uint64_t count = 0, at = kBundleMagic.size(), end = 0;
    if (!Load(b, at, &count) || count > 4096)
      return Status::Corruption("bad offload bundle header");
    at += 8;
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t off = 0, size = 0, id_len = 0;
      if (!Load(b, at, &off) || !Load(b, at + 8, &size) || !Load(b, at + 16, &id_len) ||
          id_len > 4096 || at + 24 + id_len > b.size()) {
        return Status::Corruption("truncated offload bundle entry");
      }
      ids.emplace_back(b.substr(at + 24, id_len));
      at += 24 + id_len;
      end = std::max(end, off + size);
    }
    size_t next = std::max<uint64_t>(end, at);
    pos = next < b.size() ? fatbin.find(kBundleMagic, pos + next) : std::string_view::npos;
  }
  return ids;
}

std::string BundleTarget(std::string_view id) {
  // "<kind>-<triple>-<target id>" with the triple amdgcn-amd-amdhsa and an empty environment
  // field: "hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-".
  size_t p = id.find("amdgcn-amd-amdhsa-");
  if (p == std::string_view::npos) return "";
  std::string_view rest = id.substr(p + std::strlen("amdgcn-amd-amdhsa-"));
  if (!rest.empty() && rest.front() == '-') rest.remove_prefix(1);
  return std::string(rest.substr(0, rest.find(':')));
}

Result<std::vector<std::string>> CodeObjectTargets(const std::string& so_path) {
  HTAM_ASSIGN_OR_RETURN(std::string fatbin, ReadElfSection(so_path, ".hip_fatbin"));
  HTAM_ASSIGN_OR_RETURN(std::vector<std::string> ids, ParseOffloadBundles(fatbin));
  std::vector<std::string> targets;
  for (const auto& id : ids) {
    std::string t = BundleTarget(id);
    if (!t.empty()) targets.push_back(t);
  }
  return targets;
}

}  // namespace htam::hip
