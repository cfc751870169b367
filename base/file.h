// Small file helpers shared by the daemon, the backends and the tools. A file or a folder that
// readers may see is replaced only through WriteFileAtomic, PublishFile, PublishDir or MovePath
// (tests/layering/check_calls.py keeps renames out of the other folders).
// Thread-safety: pure functions, safe for concurrent use.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace htam {

// The whole file, bytes as they are; false when it cannot be opened.
bool ReadWholeFile(const std::string& path, std::string* out);

// The whole file, or "" when it cannot be opened (for callers where a missing file reads as
// empty: benchmarks, logs shown on failure).
std::string ReadFileOrEmpty(const std::string& path);

// mkdir -p: creates `path` and its missing parents, each new one with `mode` (less the umask);
// directories that exist already are left as they are (their mode too). A relative path is
// taken from the working directory. IOError names the first directory that could not be made.
Status MakeDirs(const std::string& path, mode_t mode);

// MakeDirs(path, 0755), then, if `path` itself was new, mode 1777 (sticky, world-writable, like
// /tmp): a folder that processes of several users share, each keeping its own files there.
Status MakeSharedDir(const std::string& path);

// A temporary name beside a file about to be published by rename: `prefix` + ".tmp." + six
// random characters, created empty (mode 0600) so that no other process gets the same name.
// Process ids do not serve: workers in PID namespaces of their own share them, and one removed
// or renamed the other's file when both compiled the same source into a shared cache.
Result<std::string> CreateUniqueFile(const std::string& prefix);

// Replaces `path` with `data` so that a reader, or the file system after a crash, finds the old
// file or the new one and never a part: a temporary beside it (CreateUniqueFile), written and
// fsynced, renamed over `path`, then the folder fsynced. The file gets `mode` (the umask does not
// apply). The temporary is removed on failure; IOError names the step that failed.
Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode = 0644);

// fsync of a file or a folder (a folder after a rename in it, so that the new name is durable).
Status SyncPath(const std::string& path);

// Publishes the file `path` whole or not at all when its content is made by something that writes
// a file (a compiler's -o, a serializer): a temporary beside it (CreateUniqueFile), filled by
// `fill(temporary)`, then renamed over `path`. The temporary has `mode` when `fill` starts (a tool
// that makes its output anew gives it its own). With `durable` the temporary is fsynced before the
// rename and the folder after it (a snapshot that must survive a crash); without, a reader still
// never sees a part (a cache entry that can be made again). The temporary is removed on any
// failure; `fill`'s error is returned as it is, IOError names a step of this function that failed.
Status PublishFile(const std::string& path, const std::function<Status(const std::string&)>& fill,
                   bool durable = false, mode_t mode = 0644);

// Moves the file or folder `from` to `to` in one step (one file system: a rename), for something
// finished elsewhere (a staged cache entry) or set aside (a store being replaced). A folder may
// replace an empty folder; any other `to` that exists is left alone and the move fails. IOError
// names both paths and the reason.
Status MovePath(const std::string& from, const std::string& to);

// Publishes the folder `dir` whole or not at all: a staging folder beside it with a unique name
// (`dir` + ".tmp." + six random characters, mode `mode`), filled by `fill(staging)`, then renamed
// to `dir`. When `dir` exists already (another process published the same content first), the
// staging folder is removed and the call succeeds. The staging folder is removed on any failure;
// `fill`'s error is returned as it is, IOError names a step of this function that failed.
Status PublishDir(const std::string& dir, const std::function<Status(const std::string&)>& fill,
                  mode_t mode = 0755);

}  // namespace htam
