// The `htam` command-line tool: subcommands that look inside the memory, draw it, back it up and
// move it between sites (docs/cli.md). RunCli is the whole program, callable from tests.
// Thread-safety: RunCli is not reentrant for the same store in one process (LMDB forbids opening
// one environment twice in a process); tests run it after closing their own Memory.
#pragma once

#include <boost/program_options.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "tools/cli/records_json.h"
#include "tools/cli/source.h"

namespace htam::cli {

namespace po = boost::program_options;

// general.data_dir of the configuration installed with this binary (base/paths.h
// FindConfigFile("htamd.conf"): /etc/htam/htamd.conf for the Debian packages), or the table's
// default (./htam-data) where there is none or it cannot be read.
std::string InstalledDataDir();

// Options every subcommand accepts (before or after its name).
struct Globals {
  // htamd's general.data_dir (the store is DATA/store): by default the one the installed
  // htamd.conf names (InstalledDataDir), else ./htam-data.
  std::string data_dir = InstalledDataDir();
  std::string connect;                   // "" = read the store; else htamd's endpoint
  bool json = false;                     // JSON instead of tables
  int timeout_ms = 10000;                // per request to a daemon
  std::string server_key, client_key;    // CURVE key files for --connect
};

// What a subcommand gets: its own arguments (after the name), the globals, and the streams.
struct Context {
  Globals g;
  std::vector<std::string> args;
  std::ostream& out;
  std::ostream& err;
  std::string command;
};

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFail = 1;   // an error, or `check` found problems
inline constexpr int kExitUsage = 2;  // bad command line

// Subcommands (each in the file of its concern).
int CmdStatus(Context& c);
int CmdDirections(Context& c);
int CmdStrategies(Context& c);
int CmdShow(Context& c);
int CmdSessions(Context& c);
int CmdTrajectory(Context& c);
int CmdTop(Context& c);
int CmdExplain(Context& c);
int CmdGraph(Context& c);
int CmdBackup(Context& c);
int CmdRestore(Context& c);
int CmdCheck(Context& c);
int CmdRebuild(Context& c);
int CmdExport(Context& c);
int CmdImport(Context& c);
int CmdWorkers(Context& c);

int RunCli(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err);
// The subcommand named in argv ("" when none), skipping global options and their values.
std::string CommandName(const std::vector<std::string>& argv);

// ---- helpers shared by the subcommands ----

// Parses c.args with `opts` (plus the global options) and positional names; prints --help. Returns
// kExitOk to go on, or the exit code to return (help printed: -1 mapped to 0 by the caller).
// *done is set when the command should return the returned code at once.
int Parse(Context& c, const char* usage, po::options_description& opts,
          const std::vector<std::pair<const char*, int>>& positional, po::variables_map* vm,
          bool* done);
// Prints "htam <cmd>: <message>" on stderr and returns kExitFail.
int Fail(Context& c, const Status& s);
int Fail(Context& c, const std::string& message);
// Opens the source named by the globals: the daemon when --connect is given, else the store.
Result<std::unique_ptr<Source>> OpenSource(const Context& c);
// Same, but refuses --connect for subcommands that need the store itself.
Result<std::unique_ptr<Source>> OpenStore(const Context& c);
void PrintJson(Context& c, const Json& j);

// Direction id -> name (for tables); "start" for 0, "#id" when unknown.
std::string DirName(const std::vector<fb::DirectionT>& dirs, uint64_t id);

}  // namespace htam::cli
