// The pre-flight check of data.mdb (see store_file.h).
#include "daemon/memory/store_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <vector>

namespace htam::memory {
namespace {

constexpr uint32_t kLmdbMagic = 0xBEEFC0DE;  // MDB_MAGIC
// Offsets in a meta page (64-bit LMDB): page header 16 bytes, then MDB_meta: magic u32,
// version u32, address, mapsize, two MDB_db of 48 bytes (the free DB's md_pad holds the page
// size), last_pg, txnid.
constexpr size_t kMagicOff = 16, kPsizeOff = 40, kLastPgOff = 136, kTxnOff = 144, kMetaEnd = 152;

template <typename T>
T Load(const std::vector<char>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

// One look at the file: the meta pages first, then its size. A running daemon only ever grows the
// file and writes its data pages before the meta page that names them, so in this order a live
// store never looks truncated (the other order races with a commit that grows the file).
Result<LmdbFileInfo> InspectOnce(const std::string& path) {
  LmdbFileInfo info;
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound("no store file " + path);
  std::vector<char> p0(kMetaEnd);
  if (!f.read(p0.data(), kMetaEnd) || Load<uint32_t>(p0, kMagicOff) != kLmdbMagic)
    return Status::Corruption(path + " is not an LMDB file (bad magic at its first page)");
  uint32_t psize = Load<uint32_t>(p0, kPsizeOff);
  if (psize < 512 || psize > (1u << 20) || (psize & (psize - 1)))
    return Status::Corruption(path + " has a damaged meta page (page size " +
                              std::to_string(psize) + ")");
  info.page_size = psize;
  std::vector<char> p1(kMetaEnd);
  bool have1 =
      f.seekg(psize) && f.read(p1.data(), kMetaEnd) && Load<uint32_t>(p1, kMagicOff) == kLmdbMagic;
  const std::vector<char>& m =
      have1 && Load<uint64_t>(p1, kTxnOff) > Load<uint64_t>(p0, kTxnOff) ? p1 : p0;
  info.last_page = Load<uint64_t>(m, kLastPgOff);
  info.txn_id = Load<uint64_t>(m, kTxnOff);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::NotFound("no store file " + path);
  info.file_bytes = static_cast<uint64_t>(st.st_size);
  uint64_t need = (info.last_page + 1) * psize;
  if (info.file_bytes < need)
    return Status::Corruption(path + " is truncated: " + std::to_string(info.file_bytes) +
                              " bytes, its meta page uses " + std::to_string(need));
  return info;
}

}  // namespace

Result<LmdbFileInfo> InspectDataFile(const std::string& dir) {
  std::string path = dir + "/data.mdb";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::NotFound("no store file " + path);
  // A truncated verdict is looked at again: a file system may show a size that lags a write
  // the daemon finished a moment ago. A really truncated file stays truncated.
  Result<LmdbFileInfo> r = InspectOnce(path);
  for (int i = 0; i < 3 && !r.ok() && r.status().code() == Status::Code::kCorruption &&
                  r.status().message().find("is truncated") != std::string::npos;
       ++i) {
    ::usleep(20000);
    r = InspectOnce(path);
  }
  return r;
}

}  // namespace htam::memory
