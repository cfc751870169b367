// htam-bench: dispatches to the subcommands listed in registry.inc.
#include <cstdio>
#include <cstring>
#include <string>

#define HTAM_BENCH(name, fn, help) int fn(int argc, char** argv);
#include "tools/bench/registry.inc"
#undef HTAM_BENCH

namespace {
struct Subcommand {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};
const Subcommand kSubcommands[] = {
#define HTAM_BENCH(name, fn, help) {#name, fn, help},
#include "tools/bench/registry.inc"
#undef HTAM_BENCH
};

void Usage(FILE* out) {
  std::fprintf(
      out,
      "usage: htam-bench SUBCOMMAND [flags]   (htam-bench SUBCOMMAND --help)\n\nsubcommands:\n");
  for (const auto& s : kSubcommands) std::fprintf(out, "  %-10s %s\n", s.name, s.help);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& s : kSubcommands)
    if (std::string(argv[1]) == s.name) return s.run(argc - 2, argv + 2);
  std::fprintf(stderr, "htam-bench: unknown subcommand '%s'\n", argv[1]);
  Usage(stderr);
  return 2;
}
