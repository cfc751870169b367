// Where htam finds the files it ships (seed taxonomy, task suite, kernel ABI headers, KernelBench
// helper, backend plugins, the evaluation worker) at run time: relative to the running binary's
// install prefix, read from /proc/self/exe — never the current directory or the source tree.
//
// Layout (docs/operations.md, "Install"): <prefix>/bin/ (htamd, htam, htam-worker, ...),
// <prefix>/lib/htam/ (htam-eval-worker, backends/libhtam_backend_*.so), <prefix>/share/htam/
// (seed_taxonomy.json, tasks/, include/, kernelbench/kb_helper.py). A build tree mirrors the
// share/htam part: CMake links <build>/share/htam/* to the sources, so a binary anywhere below
// <build> finds the same names one to three folders up.
//
// Thread-safety: every function is safe for concurrent use (the executable's path is read once).
#pragma once

#include <string>

namespace htam {

// Folder of the running executable (resolved symlinks); "" if /proc/self/exe cannot be read.
std::string ExecutableDir();

// The first <ancestor>/share/htam/<relative> that exists, where <ancestor> is the executable's
// folder's parent, grandparent or great-grandparent (bin/, lib/htam/, a build tree's
// <build>/<folder>/<sub>/). Returns the canonical path, or "" if none exists.
std::string FindSharedFile(const std::string& relative);

// The same for <ancestor>/lib/htam/<relative> (the worker binary, the backend plugins).
std::string FindLibFile(const std::string& relative);

// The installed configuration file <name> (htamd.conf, worker.conf): <prefix>/etc/htam/<name>
// of the running binary's prefix, /etc/htam/<name> for the /usr prefix (Debian). Returns the
// path if the file exists, else "" (a build tree has none).
std::string FindConfigFile(const std::string& name);

// A configured path of a shipped file: `configured` when it is not empty (as given), else
// FindSharedFile(shipped); if nothing is found, the install location that was looked for first
// (<exe>/../share/htam/<shipped>), so that error messages name a useful path.
std::string ShippedPath(const std::string& configured, const std::string& shipped);

}  // namespace htam
