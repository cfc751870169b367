// A plugin's profiler run by the host; see profile_run.h.
#include "daemon/eval/verifier/profile_run.h"

#include "base/process.h"

namespace htam {
namespace {

static_assert(int(fb::Bottleneck::Unknown) == HTAM_BOTTLENECK_UNKNOWN &&
                  int(fb::Bottleneck::Memory) == HTAM_BOTTLENECK_MEMORY &&
                  int(fb::Bottleneck::Compute) == HTAM_BOTTLENECK_COMPUTE &&
                  int(fb::Bottleneck::Latency) == HTAM_BOTTLENECK_LATENCY &&
                  int(fb::Bottleneck::Launch) == HTAM_BOTTLENECK_LAUNCH,
              "htam_bottleneck follows schema/htg.fbs Bottleneck");

constexpr const char* kUnavailable = "profile unavailable: ";

// The plugin's message as it wrote it (no "what: " prefix), and the error freed.
std::string TakeMessage(htam_backend_error* e) {
  std::string m = e->message ? e->message : "(no message)";
  htam_backend_error_free(e);
  return m;
}

std::vector<std::string> Strings(const char* const* list) {
  std::vector<std::string> out;
  for (; list && *list; ++list) out.emplace_back(*list);
  return out;
}

}  // namespace

Result<ProfileCommand> GetProfileCommand(const BackendInstance& b, const ProfileRequest& r) {
  const PluginApi& api = b.api();
  if (!api.profile_command || !api.profile_parse) {
    const char* name = b.description().name;
    return Status::Unavailable(std::string(kUnavailable) + "the " + (name ? name : "") +
                               " backend offers no profiler");
  }
  htam_profile_command_request req{};
  req.struct_size = sizeof req;
  req.tool = r.tool.c_str();
  req.search_path = r.search_path.empty() ? nullptr : r.search_path.c_str();
  htam_profile_command out{};
  out.struct_size = sizeof out;
  if (htam_backend_error* e = api.profile_command(b.handle(), &req, &out))
    return Status::Unavailable(kUnavailable + TakeMessage(e));
  ProfileCommand c;
  c.argv = Strings(out.argv);
  c.child_options = Strings(out.child_options);
  c.tool_name = out.tool_name && *out.tool_name ? out.tool_name : "the profiler";
  if (c.argv.empty())
    return Status::Unavailable(std::string(kUnavailable) + "the plugin gave an empty command");
  return c;
}

ProfileOutcome RunProfile(const BackendInstance& b, const ProfileCommand& c,
                          const std::vector<std::string>& program_argv, const std::string& cwd,
                          const ProfileRequest& r) {
  ProfileOutcome p;
  std::vector<std::string> argv = c.argv;
  argv.insert(argv.end(), program_argv.begin(), program_argv.end());
  auto run = RunProcess(argv, cwd, r.timeout_s, 4 << 20);
  if (!run.ok()) {
    p.note = kUnavailable + ("cannot start " + c.tool_name + ": ") + run.status().message();
    return p;
  }
  if (run->timed_out) {
    p.note = kUnavailable + c.tool_name + " ran past " + std::to_string(int(r.timeout_s)) + " s";
    return p;
  }
  htam_profile_output in{};
  in.struct_size = sizeof in;
  in.text = run->output.data();
  in.text_len = run->output.size();
  in.exit_code = run->signaled ? -1 : run->exit_code;
  in.signaled = run->signaled ? 1 : 0;
  in.memory_pct = r.memory_pct;
  in.compute_pct = r.compute_pct;
  in.launch_us = r.launch_us;
  htam_profile_summary out{};
  out.struct_size = sizeof out;
  out.dram_pct = out.sm_pct = out.occupancy_pct = out.total_us = -1;
  out.kernels = -1;
  out.bottleneck = HTAM_BOTTLENECK_UNKNOWN;
  if (htam_backend_error* e = b.api().profile_parse(b.handle(), &in, &out)) {
    p.note = kUnavailable + TakeMessage(e);
    return p;
  }
  p.available = true;
  p.note = out.note ? out.note : "";
  p.dram_pct = out.dram_pct;
  p.sm_pct = out.sm_pct;
  p.occupancy_pct = out.occupancy_pct;
  p.kernels = out.kernels < 0 ? 0 : out.kernels;
  p.total_us = out.total_us < 0 ? 0 : out.total_us;
  p.bottleneck =
      out.bottleneck >= HTAM_BOTTLENECK_UNKNOWN && out.bottleneck <= HTAM_BOTTLENECK_LAUNCH
          ? fb::Bottleneck(out.bottleneck)
          : fb::Bottleneck::Unknown;
  return p;
}

}  // namespace htam
