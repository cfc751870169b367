// htam-eval's command line (eval_args.h): one option description holds the tool's flags and the
// configuration table, so a table option may stand anywhere among the flags; parsed by
// base/args.h's rules.
#include "tools/eval/eval_args.h"

#include <filesystem>
#include <sstream>

#include "base/args.h"
#include "base/paths.h"

namespace htam::evaltool {
namespace {

namespace po = boost::program_options;

const char kUsage[] =
    "usage: htam-eval --task DIR [--backend B] (FILE... | --source FILE... | --reference |\n"
    "                 --lineage [--write]) [--queue] [--profile] [--seeds N] [--reps N]\n"
    "                 [--sets N] [--cache DIR] [--compile-threads N] [--plugin PATH]\n"
    "                 [--config FILE] [--option [section.]name=value ...] [--section.name V ...]\n"
    "Evaluates candidate kernels through htamd's pipeline (sandboxed htam-eval-worker processes,\n"
    "runners, the verification gate) and prints one JSON object per candidate.\n"
    "(--task DIR repeated: --reference or --lineage of every task, in one queue.)\n"
    "Exit status: 0 done (as expected), 1 an expectation failed (a lineage variant, a reference\n"
    "not Ok), 2 bad command line or infrastructure error, 4 the backend cannot run here.\n";

bool IsTableOption(const std::string& name) {
  for (const auto& spec : OptionTable())
    if (spec.name == name) return true;
  return false;
}

// A positive integer or InvalidArgument naming the flag.
Status PositiveInt(const std::string& flag, const std::string& v, int* out) {
  size_t used = 0;
  long n = 0;
  try {
    n = std::stol(v, &used);
  } catch (...) {
    used = 0;
  }
  if (used != v.size() || v.empty() || n <= 0 || n > 1000000)
    return Status::InvalidArgument("--" + flag + " needs a positive integer, not '" + v + "'");
  *out = int(n);
  return Status::OK();
}

Status SetOption(Config* c, const std::string& name, const std::string& value,
                 const std::string& given_as) {
  Status st = c->Set(name, value);
  if (!st.ok()) return Status::InvalidArgument(given_as + ": " + st.message());
  return Status::OK();
}

po::options_description ToolFlags() {
  po::options_description d("htam-eval options");
  auto list = [] { return po::value<std::vector<std::string>>()->composing(); };
  auto text = [] { return po::value<std::string>(); };
  d.add_options()("help,h", "this text")("version", "print the version")(
      "task", list(), "task directory (task.json, references, lineage.json); repeatable")(
      "source", list(), "candidate source file (also as positional arguments); repeatable")(
      "reference", po::bool_switch(), "evaluate the task's reference against itself")(
      "lineage", po::bool_switch(), "evaluate every variant of DIR/lineage.json, check 'expected'")(
      "write", po::bool_switch(), "with --lineage: write the results into 'measured'")(
      "queue", po::bool_switch(), "submit every candidate at once (compiled ahead)")(
      "profile", po::bool_switch(), "profile every Ok candidate (Nsight Compute for CUDA)")(
      "backend", text(), "cpu, cuda or hip (default: the files' extension, lineage.json, cuda)")(
      "language", text(), "the candidates' language (default: the backend's; *.py: kernelbench)")(
      "seeds", text(), "seeds per shape in the gate (eval.seeds)")(
      "reps", text(), "timed repetitions (eval.repetitions)")(
      "sets", text(), "rotating input sets while timing (eval.input_sets)")(
      "cache", text(), "compile cache folder (eval.cache_dir; default: a temporary one)")(
      "compile-threads", text(),
      "compiles ahead (eval.compile_ahead_threads, eval.cuda_compile_threads)")(
      "plugin", text(), "a backend plugin libhtam_backend_<name>.so (eval.plugin_dir, backend)")(
      "option", list(), "a table option as [section.]name=value (eval.X, or X, or cuda_X)")(
      "config", text(), "a configuration file (as htamd's; the command line wins)")(
      "in-process", po::bool_switch(),
      "internal: the gate in this process (for a profiler that watches this process)")(
      "single-call", po::bool_switch(), "internal, with --in-process: one call, no timing");
  return d;
}

po::options_description TableFlags() {
  po::options_description d("configuration table (configs/htamd.conf)");
  for (const auto& spec : OptionTable())
    d.add_options()(spec.name.c_str(), po::value<std::string>(), spec.help.c_str());
  return d;
}

// Config from --config, the table options and --option, then the flags standing for options.
Status BuildConfig(const po::variables_map& vm, Config* c) {
  *c = Config::Defaults();
  if (vm.count("config")) {
    const std::string file = vm["config"].as<std::string>();
    const char* argv[] = {"htam-eval", "--config", file.c_str()};
    std::ostringstream ignored;
    bool exit_now = false;
    auto parsed = Config::Parse(3, argv, {"htam-eval", "", ""}, ignored, &exit_now);
    if (!parsed.ok()) return parsed.status();
    *c = *parsed;
  }
  for (const auto& spec : OptionTable())
    if (vm.count(spec.name))
      HTAM_RETURN_IF_ERROR(
          SetOption(c, spec.name, vm[spec.name].as<std::string>(), "--" + spec.name));
  if (vm.count("option")) {
    for (const auto& o : vm["option"].as<std::vector<std::string>>()) {
      const size_t eq = o.find('=');
      const std::string name = TableOptionFor(o.substr(0, eq));
      if (eq == std::string::npos || name.empty())
        return Status::InvalidArgument("--option " + o +
                                       ": not name=value of a configuration table option");
      HTAM_RETURN_IF_ERROR(SetOption(c, name, o.substr(eq + 1), "--option " + o));
    }
  }
  const std::pair<const char*, std::vector<const char*>> counts[] = {
      {"seeds", {"eval.seeds"}},
      {"reps", {"eval.repetitions"}},
      {"sets", {"eval.input_sets"}},
      {"compile-threads", {"eval.compile_ahead_threads", "eval.cuda_compile_threads"}}};
  for (const auto& [flag, names] : counts) {
    if (!vm.count(flag)) continue;
    int n = 0;
    HTAM_RETURN_IF_ERROR(PositiveInt(flag, vm[flag].as<std::string>(), &n));
    for (const char* name : names) HTAM_RETURN_IF_ERROR(c->Set(name, std::to_string(n)));
  }
  if (vm.count("cache"))
    HTAM_RETURN_IF_ERROR(c->Set("eval.cache_dir", vm["cache"].as<std::string>()));
  return Status::OK();
}

// --plugin PATH: its folder is the plugin directory and its name the backend.
Status ApplyPlugin(const std::string& path, EvalArgs* a, Config* c) {
  namespace fs = std::filesystem;
  const std::string name = PluginBackendName(path);
  if (name.empty())
    return Status::InvalidArgument("--plugin " + path + ": not a libhtam_backend_<name>.so file");
  if (!fs::is_regular_file(path))
    return Status::InvalidArgument("--plugin " + path + ": no such file");
  if (!a->backend.empty() && a->backend != name)
    return Status::InvalidArgument("--plugin " + path + " is not --backend " + a->backend);
  a->backend = name;
  HTAM_RETURN_IF_ERROR(
      c->Set("eval.plugin_dir", fs::absolute(path).parent_path().lexically_normal().string()));
  return c->Set("eval.backends", name);
}

Status CheckCombination(const EvalArgs& a) {
  if (a.tasks.empty()) return Status::InvalidArgument("--task DIR is required");
  if (!a.reference && !a.lineage && a.sources.empty())
    return Status::InvalidArgument("give candidate files, --reference or --lineage");
  if (a.tasks.size() > 1 && !a.sources.empty())
    return Status::InvalidArgument("candidate files take one --task (repeat --task only with "
                                   "--reference or --lineage)");
  if (a.write && !a.lineage) return Status::InvalidArgument("--write needs --lineage");
  for (const auto& t : a.tasks)
    if (!std::filesystem::is_regular_file(t + "/task.json"))
      return Status::InvalidArgument("--task " + t + ": no task.json there (not a task directory)");
  return Status::OK();
}

}  // namespace

std::string TableOptionFor(const std::string& key) {
  for (const std::string& name : {key, "eval." + key, "eval.cuda_" + key})
    if (IsTableOption(name)) return name;
  return "";
}

Status ParseEvalArgs(int argc, const char* const* argv, EvalArgs* a, Config* c, std::ostream& out,
                     bool* exit_now) {
  *exit_now = false;
  po::options_description tool = ToolFlags(), all;
  all.add(tool).add(TableFlags()).add_options()(
      "files", po::value<std::vector<std::string>>()->composing(), "");
  po::positional_options_description positional;
  positional.add("files", -1);
  po::variables_map vm;
  std::vector<po::option> given;
  HTAM_RETURN_IF_ERROR(ParseOptions(std::vector<std::string>(argv + (argc > 0 ? 1 : 0), argv + argc),
                                    all, &vm, &positional, &given));
  // Candidate files in the order given, whether named by --source or positional.
  a->sources.clear();
  for (const auto& o : given)
    if (o.string_key == "source" || o.string_key == "files")
      a->sources.insert(a->sources.end(), o.value.begin(), o.value.end());
  if (vm.count("help")) {
    out << kUsage << "\n" << tool << "\nAny option of the configuration table (configs/htamd.conf)"
        << " may be given as --section.name VALUE.\n";
    *exit_now = true;
    return Status::OK();
  }
  if (vm.count("version")) {
    out << "htam-eval " << HTAM_VERSION << "\n";
    *exit_now = true;
    return Status::OK();
  }
  auto strings = [&](const char* k) {
    return vm.count(k) ? vm[k].as<std::vector<std::string>>() : std::vector<std::string>{};
  };
  a->tasks = strings("task");
  a->backend = vm.count("backend") ? vm["backend"].as<std::string>() : "";
  a->language = vm.count("language") ? vm["language"].as<std::string>() : "";
  a->reference = vm["reference"].as<bool>();
  a->lineage = vm["lineage"].as<bool>();
  a->write = vm["write"].as<bool>();
  a->queue = vm["queue"].as<bool>();
  a->profile = vm["profile"].as<bool>();
  a->in_process = vm["in-process"].as<bool>();
  a->single_call = vm["single-call"].as<bool>();
  if (a->single_call && !a->in_process)
    return Status::InvalidArgument("--single-call is a mode of --in-process");
  HTAM_RETURN_IF_ERROR(BuildConfig(vm, c));
  a->log_level_given = vm.count("general.log_level") > 0;
  if (vm.count("plugin")) HTAM_RETURN_IF_ERROR(ApplyPlugin(vm["plugin"].as<std::string>(), a, c));
  return CheckCombination(*a);
}

}  // namespace htam::evaltool
