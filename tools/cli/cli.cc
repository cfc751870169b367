// RunCli: the global options, the subcommand table and the helpers every subcommand shares.
#include "tools/cli/cli.h"

#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>

#include "base/args.h"
#include "base/log.h"
#include "base/paths.h"
#include "daemon/config/config.h"

namespace htam::cli {
namespace {

struct Command {
  const char* name;
  int (*fn)(Context&);
  const char* summary;
};

const Command kCommands[] = {
    {"status", CmdStatus, "store size, record counts, schema version, index freshness"},
    {"directions", CmdDirections, "level-1 directions with their edges (what tends to come next)"},
    {"strategies", CmdStrategies, "level-2 strategies, filtered and sorted"},
    {"show", CmdShow, "any record by kind:id, id, name or candidate hash"},
    {"sessions", CmdSessions, "optimization sessions, newest first"},
    {"trajectory", CmdTrajectory, "the steps of a session and its speedup curve (--plot out.svg)"},
    {"explain", CmdExplain, "replay the policy's decision for a step of a session"},
    {"top", CmdTop, "best strategies per task category and backend"},
    {"graph", CmdGraph, "the HTG as DOT, JSON or GraphML; rendered with Graphviz"},
    {"backup", CmdBackup, "consistent compacted copy of the store (safe while htamd runs)"},
    {"restore", CmdRestore, "put a backup in place (htamd stopped)"},
    {"check", CmdCheck, "verify the store's integrity; exit 1 on problems"},
    {"rebuild", CmdRebuild, "rebuild indexes and statistics from the records (htamd stopped)"},
    {"export", CmdExport, "write the memory as portable JSON Lines"},
    {"import", CmdImport, "merge an export into this store (htamd stopped)"},
    {"workers", CmdWorkers, "evaluation workers, devices, queues of a running htamd (--connect)"},
};

po::options_description GlobalOptions(Globals* g) {
  po::options_description o("Global options");
  o.add_options()("data-dir,d", po::value(&g->data_dir)->default_value(g->data_dir),
                  "htamd's general.data_dir (the store is DATA/store)")(
      "connect,c", po::value(&g->connect),
      "read through a running htamd at this endpoint, "
      "e.g. tcp://127.0.0.1:7878")("json", po::bool_switch(&g->json),
                                   "print JSON instead of a table")(
      "timeout-ms", po::value(&g->timeout_ms)->default_value(g->timeout_ms),
      "per request to htamd")("server-key", po::value(&g->server_key),
                              "CURVE: the server's public key file (NAME.pub)")(
      "client-key", po::value(&g->client_key), "CURVE: this client's key file (NAME.key)")(
      "help,h", "this help");
  return o;
}

void TopHelp(std::ostream& out) {
  out << "usage: htam [--data-dir DIR | --connect ENDPOINT] [--json] <command> [options]\n\n"
         "Looks inside htam's memory, draws it, backs it up and moves it between sites.\n"
         "Reads the store read-only (safe while htamd runs) unless a command says otherwise.\n\n"
         "Commands:\n";
  for (const auto& c : kCommands) {
    std::string n = c.name;
    out << "  " << n << std::string(n.size() < 12 ? 12 - n.size() : 1, ' ') << c.summary << "\n";
  }
  out << "\n'htam <command> --help' describes a command's options.\n";
}

}  // namespace

// Global options may come before the command name: the index of the first word that is neither an
// option nor an option's value (base/args.h); *before gets the words ahead of it.
static size_t SplitGlobals(const std::vector<std::string>& argv, std::vector<std::string>* before) {
  Globals g;
  const size_t i = FirstWord(argv, GlobalOptions(&g));
  before->assign(argv.begin(), argv.begin() + static_cast<long>(i));
  return i;
}

std::string CommandName(const std::vector<std::string>& argv) {
  std::vector<std::string> before;
  size_t i = SplitGlobals(argv, &before);
  return i < argv.size() ? argv[i] : "";
}

int Parse(Context& c, const char* usage, po::options_description& opts,
          const std::vector<std::pair<const char*, int>>& positional, po::variables_map* vm,
          bool* done) {
  *done = false;
  po::options_description all;
  all.add(opts).add(GlobalOptions(&c.g));
  po::options_description hidden;
  po::positional_options_description pos;
  for (const auto& [name, count] : positional) {
    hidden.add_options()(name, po::value<std::vector<std::string>>());
    pos.add(name, count);
  }
  po::options_description cmdline;
  cmdline.add(all).add(hidden);
  const Status st = ParseOptions(c.args, cmdline, vm, &pos);
  if (!st.ok()) {
    c.err << "htam " << c.command << ": " << st.message() << " (see htam " << c.command
          << " --help)\n";
    *done = true;
    return kExitUsage;
  }
  if (vm->count("help")) {
    c.out << "usage: htam " << c.command << " " << usage << "\n\n" << all;
    *done = true;
    return kExitOk;
  }
  for (const auto& [name, count] : positional) {
    if (count > 0 && (!vm->count(name) || (*vm)[name].as<std::vector<std::string>>().size() <
                                              static_cast<size_t>(count))) {
      c.err << "htam " << c.command << ": missing <" << name << "> (usage: htam " << c.command
            << " " << usage << ")\n";
      *done = true;
      return kExitUsage;
    }
  }
  return kExitOk;
}

int Fail(Context& c, const Status& s) {
  return Fail(c, s.message().empty() ? s.ToString() : s.message());
}

int Fail(Context& c, const std::string& message) {
  c.err << "htam " << c.command << ": " << message << "\n";
  return kExitFail;
}

Result<std::unique_ptr<Source>> OpenSource(const Context& c) {
  if (!c.g.connect.empty())
    return OpenRemote(c.g.connect, c.g.timeout_ms, c.g.server_key, c.g.client_key);
  return OpenLocal(c.g.data_dir);
}

Result<std::unique_ptr<Source>> OpenStore(const Context& c) {
  if (!c.g.connect.empty())
    return Status::InvalidArgument("'" + c.command +
                                   "' reads the store itself: use --data-dir, not --connect");
  return OpenLocal(c.g.data_dir);
}

void PrintJson(Context& c, const Json& j) {
  // A store written before every field was checked at the door may hold invalid UTF-8: such
  // bytes print as U+FFFD instead of aborting the command.
  c.out << j.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
}

std::string DirName(const std::vector<fb::DirectionT>& dirs, uint64_t id) {
  if (id == 0) return "start";
  for (const auto& d : dirs)
    if (d.id == id) return d.name;
  return "#" + std::to_string(id);
}

std::string InstalledDataDir() {
  static const std::string dir = [] {
    Config defaults = Config::Defaults();
    const std::string conf = FindConfigFile("htamd.conf");
    if (conf.empty()) return defaults.GetString("general.data_dir");
    const char* argv[] = {"htam", "--config", conf.c_str()};
    std::ostringstream sink;
    bool exit_now = false;
    auto cfg = Config::Parse(3, argv, ProgramInfo{"htam", "", ""}, sink, &exit_now);
    return (cfg.ok() ? *cfg : defaults).GetString("general.data_dir");
  }();
  return dir;
}

int RunCli(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  // The memory library's informational lines are noise for a command-line tool; HTAM_LOG_LEVEL
  // (debug, info, warn, error) brings them back.
  LogLevel level = LogLevel::kError;
  if (const char* env = std::getenv("HTAM_LOG_LEVEL")) (void)ParseLogLevel(env, &level);
  SetLogLevel(level);
  std::vector<std::string> before;
  size_t i = SplitGlobals(argv, &before);
  if (i == argv.size()) {
    bool help = false;
    for (const auto& a : before) help = help || a == "-h" || a == "--help";
    TopHelp(help ? out : err);
    return help ? kExitOk : kExitUsage;
  }
  const std::string name = argv[i];
  for (const auto& cmd : kCommands) {
    if (name != cmd.name) continue;
    Globals g;
    Context c{g, {}, out, err, name};
    // The globals given before the name are parsed again with the command's options.
    c.args = before;
    c.args.insert(c.args.end(), argv.begin() + static_cast<long>(i) + 1, argv.end());
    return cmd.fn(c);
  }
  err << "htam: unknown command '" << name << "' (see htam --help)\n";
  return kExitUsage;
}

}  // namespace htam::cli
