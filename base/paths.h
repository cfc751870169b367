// Where htam finds what it ships (seed taxonomy, task suite, kernel ABI headers, KernelBench
// helper, world families, its executables, the evaluation worker, backend plugins) at run time:
// relative to the running binary, read from /proc/self/exe — never the current directory or the
// source tree. sdk/python/htam/paths.py is the same lookup for the Python packages.
//
// Layout (docs/operations.md, "Install"): <prefix>/bin/ (htamd, htam, htam-worker, ...),
// <prefix>/lib/htam/ (htam-eval-worker, backends/libhtam_backend_*.so), <prefix>/share/htam/
// (seed_taxonomy.json, tasks/, include/, kernelbench/, world/). A build tree mirrors it: CMake
// links <build>/share/htam/* to the sources and <build>/bin/*, <build>/lib/htam/* to the built
// binaries and plugins, so a binary anywhere below <build> finds the same names one to three
// folders up. A flat folder of staged binaries (tools/gpu/stage_all.sh) may hold share/htam
// beside them.
//
// Thread-safety: every function is safe for concurrent use (the executable's path is read once).
#pragma once

#include <map>
#include <string>

namespace htam {

// Folder of the running executable (resolved symlinks); "" if /proc/self/exe cannot be read.
std::string ExecutableDir();

// Path of the running executable (resolved symlinks); "" if /proc/self/exe cannot be read.
std::string ExecutablePath();

// The first <ancestor>/share/htam/<relative> that exists, where <ancestor> is the executable's
// folder, its parent, grandparent or great-grandparent (a staged folder, bin/, lib/htam/, a build
// tree's <build>/<folder>/<sub>/). Returns the canonical path, or "" if none exists.
std::string FindSharedFile(const std::string& relative);

// The same for <ancestor>/lib/htam/<relative> (the worker binary, the backend plugins).
std::string FindLibFile(const std::string& relative);

// An executable htam ships: <name> beside the running binary, else <ancestor>/bin/<name>, else
// <ancestor>/lib/htam/<name> (htam-eval-worker). The canonical path, or "" if none exists.
std::string FindExecutable(const std::string& name);

// The installed configuration file <name> (htamd.conf, worker.conf): <prefix>/etc/htam/<name>
// of the running binary's prefix, /etc/htam/<name> for the /usr prefix (Debian). Returns the
// path if the file exists, else "" (a build tree has none).
std::string FindConfigFile(const std::string& name);

// A configured path of a shipped file: `configured` when it is not empty (as given), else
// FindSharedFile(shipped); if nothing is found, the install location that was looked for first
// (<exe>/../share/htam/<shipped>), so that error messages name a useful path.
std::string ShippedPath(const std::string& configured, const std::string& shipped);

// The one plugin search. Every libhtam_backend_<name>.so in `configured_dir` when it is not
// empty; else beside the running binary, in its plugins/ folder, then in
// <ancestor>/lib/htam/backends/. The first file of a name wins. Backend name -> absolute path.
std::map<std::string, std::string> FindPlugins(const std::string& configured_dir);

// The name of the backend of a plugin file ("cuda" for .../libhtam_backend_cuda.so); "" when the
// file name is not libhtam_backend_<name>.so.
std::string PluginBackendName(const std::string& path);

}  // namespace htam
