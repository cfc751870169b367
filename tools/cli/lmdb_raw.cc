// Direct LMDB access of the CLI (see lmdb_raw.h).
#include "tools/cli/lmdb_raw.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace htam::cli {
namespace {

constexpr unsigned kMaxDbs = 32;             // more than the store's named databases
constexpr uint32_t kLmdbMagic = 0xBEEFC0DE;  // MDB_MAGIC
// Offsets in a meta page (64-bit LMDB): page header 16 bytes, then MDB_meta: magic u32,
// version u32, address, mapsize, two MDB_db of 48 bytes (the free DB's md_pad holds the page
// size), last_pg, txnid.
constexpr size_t kMagicOff = 16, kPsizeOff = 40, kLastPgOff = 136, kTxnOff = 144, kMetaEnd = 152;

Status Lmdb(int rc, const std::string& what) {
  if (rc == MDB_SUCCESS) return Status::OK();
  std::string m = what + ": " + mdb_strerror(rc);
  if (rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID ||
      rc == MDB_VERSION_MISMATCH)
    return Status::Corruption(m);
  if (rc == MDB_NOTFOUND) return Status::NotFound(m);
  return Status::IOError(m);
}

template <typename T>
T Load(const std::vector<char>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

MDB_val Val(std::string_view s) {
  return MDB_val{s.size(), const_cast<char*>(s.data())};
}
std::string_view Str(const MDB_val& v) {
  return {static_cast<const char*>(v.mv_data), v.mv_size};
}

}  // namespace

namespace {

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

Status RunIsolated(const std::function<Status()>& fn, const std::string& what) {
  int p[2];
  if (::pipe(p) != 0) return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(p[0]);
    ::close(p[1]);
    return fn();
  }
  if (pid == 0) {
    ::close(p[0]);
    Status s = fn();
    // "0" on success: a child that ends without a word (a sanitizer's crash report) failed.
    std::string msg = s.ok() ? "0" : std::to_string(static_cast<int>(s.code())) + " " + s.message();
    ssize_t n = ::write(p[1], msg.data(), msg.size());
    (void)n;
    ::_exit(0);
  }
  ::close(p[1]);
  std::string msg;
  char buf[1024];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) msg.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(st))
    return Status::Corruption(what + " crashed (" + strsignal(WTERMSIG(st)) +
                              "): the store is damaged");
  if (msg == "0") return Status::OK();
  if (msg.empty())
    return Status::Corruption(what + " failed without an answer (exit " +
                              std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : -1) +
                              "): the store is damaged");
  size_t sp = msg.find(' ');
  int code = std::atoi(msg.substr(0, sp).c_str());
  std::string text = sp == std::string::npos ? msg : msg.substr(sp + 1);
  switch (static_cast<Status::Code>(code)) {
    case Status::Code::kCorruption: return Status::Corruption(text);
    case Status::Code::kNotFound: return Status::NotFound(text);
    case Status::Code::kInvalidArgument: return Status::InvalidArgument(text);
    default: return Status::IOError(text);
  }
}

Status CopyCompact(const std::string& store_dir, const std::string& dest_dir) {
  HTAM_RETURN_IF_ERROR(InspectDataFile(store_dir).status());
  MDB_env* env = nullptr;
  HTAM_RETURN_IF_ERROR(Lmdb(mdb_env_create(&env), "creating environment"));
  mdb_env_set_maxdbs(env, kMaxDbs);
  int rc = mdb_env_open(env, store_dir.c_str(), MDB_RDONLY | MDB_NOTLS, 0644);
  if (rc != MDB_SUCCESS) {
    mdb_env_close(env);
    return Lmdb(rc, "opening " + store_dir + " read-only");
  }
  rc = mdb_env_copy2(env, dest_dir.c_str(), MDB_CP_COMPACT);
  mdb_env_close(env);
  return Lmdb(rc, "copying " + store_dir + " to " + dest_dir);
}

Result<std::unique_ptr<RawEnv>> RawEnv::OpenWrite(const std::string& dir, size_t map_bytes) {
  HTAM_RETURN_IF_ERROR(InspectDataFile(dir).status());
  std::unique_ptr<RawEnv> e(new RawEnv());
  HTAM_RETURN_IF_ERROR(Lmdb(mdb_env_create(&e->env_), "creating environment"));
  mdb_env_set_maxdbs(e->env_, kMaxDbs);
  HTAM_RETURN_IF_ERROR(Lmdb(mdb_env_set_mapsize(e->env_, map_bytes), "setting the map size"));
  HTAM_RETURN_IF_ERROR(Lmdb(mdb_env_open(e->env_, dir.c_str(), MDB_NOTLS, 0644), "opening " + dir));
  return e;
}

Result<std::unique_ptr<RawEnv>> RawEnv::OpenRead(const std::string& dir) {
  HTAM_RETURN_IF_ERROR(InspectDataFile(dir).status());
  std::unique_ptr<RawEnv> e(new RawEnv());
  e->read_only_ = true;
  HTAM_RETURN_IF_ERROR(Lmdb(mdb_env_create(&e->env_), "creating environment"));
  mdb_env_set_maxdbs(e->env_, kMaxDbs);
  HTAM_RETURN_IF_ERROR(
      Lmdb(mdb_env_open(e->env_, dir.c_str(), MDB_RDONLY | MDB_NOTLS, 0644), "opening " + dir));
  return e;
}

RawEnv::~RawEnv() {
  if (env_) mdb_env_close(env_);
}

Result<std::unique_ptr<RawTxn>> RawTxn::Begin(RawEnv* env) {
  std::unique_ptr<RawTxn> t(new RawTxn());
  t->read_only_ = env->read_only();
  HTAM_RETURN_IF_ERROR(
      Lmdb(mdb_txn_begin(env->env(), nullptr, t->read_only_ ? MDB_RDONLY : 0, &t->txn_),
           "beginning a transaction"));
  return t;
}

RawTxn::~RawTxn() {
  if (txn_) mdb_txn_abort(txn_);
}

Result<MDB_dbi> RawTxn::Dbi(const char* db) {
  MDB_dbi dbi;
  int rc = mdb_dbi_open(txn_, db, read_only_ ? 0 : MDB_CREATE, &dbi);
  if (rc == MDB_NOTFOUND) return Status::NotFound(std::string("no database ") + db);
  HTAM_RETURN_IF_ERROR(Lmdb(rc, std::string("opening database ") + db));
  return dbi;
}

Status RawTxn::Get(const char* db, std::string_view key, std::string* value) {
  HTAM_ASSIGN_OR_RETURN(MDB_dbi dbi, Dbi(db));
  MDB_val k = Val(key), v;
  int rc = mdb_get(txn_, dbi, &k, &v);
  if (rc == MDB_NOTFOUND) return Status::NotFound(std::string("no such key in ") + db);
  HTAM_RETURN_IF_ERROR(Lmdb(rc, std::string("get from ") + db));
  value->assign(Str(v));
  return Status::OK();
}

Status RawTxn::Put(const char* db, std::string_view key, std::string_view value) {
  HTAM_ASSIGN_OR_RETURN(MDB_dbi dbi, Dbi(db));
  MDB_val k = Val(key), v = Val(value);
  return Lmdb(mdb_put(txn_, dbi, &k, &v, 0), std::string("put into ") + db);
}

Status RawTxn::Scan(const char* db, std::string_view prefix,
                    const std::function<bool(std::string_view, std::string_view)>& fn) {
  auto d = Dbi(db);
  if (d.status().IsNotFound()) return Status::OK();
  HTAM_ASSIGN_OR_RETURN(MDB_dbi dbi, std::move(d));
  MDB_cursor* c = nullptr;
  HTAM_RETURN_IF_ERROR(Lmdb(mdb_cursor_open(txn_, dbi, &c), "cursor"));
  MDB_val k = Val(prefix), v;
  int rc = prefix.empty() ? mdb_cursor_get(c, &k, &v, MDB_FIRST)
                          : mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
  while (rc == MDB_SUCCESS) {
    std::string_view key = Str(k);
    if (key.substr(0, prefix.size()) != prefix || !fn(key, Str(v))) break;
    rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
  }
  mdb_cursor_close(c);
  if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) return Lmdb(rc, std::string("scanning ") + db);
  return Status::OK();
}

Status RawTxn::Last(const char* db, std::string* key) {
  HTAM_ASSIGN_OR_RETURN(MDB_dbi dbi, Dbi(db));
  MDB_cursor* c = nullptr;
  HTAM_RETURN_IF_ERROR(Lmdb(mdb_cursor_open(txn_, dbi, &c), "cursor"));
  MDB_val k, v;
  int rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
  if (rc == MDB_SUCCESS) key->assign(Str(k));
  mdb_cursor_close(c);
  if (rc == MDB_NOTFOUND) return Status::NotFound(std::string(db) + " is empty");
  return Lmdb(rc, std::string("last of ") + db);
}

Status RawTxn::Commit() {
  int rc = mdb_txn_commit(txn_);
  txn_ = nullptr;
  return Lmdb(rc, "committing");
}

}  // namespace htam::cli
