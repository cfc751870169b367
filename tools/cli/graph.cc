// The HTG picture: graph model, DOT / GraphML / JSON writers, Graphviz rendering, `htam graph`.
#include "tools/cli/graph.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "base/process.h"
#include "tools/cli/cli.h"
#include "tools/cli/plot.h"
#include "tools/cli/table.h"

namespace htam::cli {
namespace {

std::string StatsLine(const fb::GainStats& s) {
  if (!s.uses()) return "no uses yet";
  return std::to_string(s.uses()) + " uses, " + Fixed(100 * SuccessRate(s), 0) + "% ok, " +
         GainFactor(MeanGain(s));
}

// A mean log gain within this of 0 is "no change" (x0.99 .. x1.01).
constexpr double kNoChange = 0.01;

// Boxes: green for experience that paid off (mostly successful and faster on average), red for
// one that did not (slower on average, or rarely successful), yellow in between, grey without
// experience. A direction that mostly "succeeds" while making kernels slower is red.
std::string Fill(const fb::GainStats& s) {
  if (!s.uses()) return "#f5f5f5";
  const double r = SuccessRate(s), gain = MeanGain(s);
  if (gain < -kNoChange || r < 0.3) return "#ffcdd2";
  if (gain > kNoChange && r >= 0.6) return "#c8e6c9";
  return "#fff9c4";
}

// Edges: green when the step paid off on average, red when it made kernels slower or rarely
// succeeded, grey when it changed nothing measurable.
std::string EdgeColor(const fb::GainStats& s) {
  const double gain = MeanGain(s);
  if (gain > kNoChange) return "#2e7d32";
  if (gain < -kNoChange || SuccessRate(s) < 0.3) return "#c62828";
  return "#616161";
}

std::string DotQuote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o + "\"";
}

}  // namespace

Result<Graph> BuildGraph(Source& src, const GraphOptions& o) {
  Graph g;
  HTAM_ASSIGN_OR_RETURN(auto dirs, src.Directions());
  HTAM_ASSIGN_OR_RETURN(auto edges, src.Edges());
  uint64_t expand = 0;
  if (!o.expand.empty()) {
    HTAM_ASSIGN_OR_RETURN(expand, ResolveDirection(dirs, o.expand));
  }
  std::vector<EdgeSummary> sum = SummarizeEdges(edges, false);
  std::erase_if(sum, [&](const EdgeSummary& e) { return e.stats.uses() < o.min_count; });
  std::map<uint64_t, bool> linked;
  for (const auto& e : sum) linked[e.from] = linked[e.to] = true;
  if (linked.count(0)) g.nodes.push_back({"start", "start", "start", "session start", {}, 0});
  for (const auto& d : dirs) {
    if (!o.include_unused && !linked.count(d.id) && d.id != expand) continue;
    g.nodes.push_back({"d" + std::to_string(d.id), "direction", d.name, d.title,
                       d.stats ? *d.stats : fb::GainStats(), d.id});
  }
  for (const auto& e : sum)
    g.edges.push_back({e.from ? "d" + std::to_string(e.from) : "start", "d" + std::to_string(e.to),
                       "transition", e.stats});
  if (expand) {
    HTAM_ASSIGN_OR_RETURN(auto strategies, src.Strategies(expand, "", false));
    for (const auto& s : strategies) {
      std::string id = "s" + std::to_string(s.id);
      // A strategy is drawn by its verified uses; client-reported ones are named apart.
      const fb::GainStats verified = s.verified_stats ? *s.verified_stats : fb::GainStats();
      const uint32_t all = s.stats ? s.stats->uses() : 0;
      std::string title = s.title;
      if (all > verified.uses())
        title += " (+" + std::to_string(all - verified.uses()) + " unverified uses)";
      g.nodes.push_back({id, "strategy", s.name, title, verified, s.id});
      g.edges.push_back({"d" + std::to_string(expand), id, "contains", verified});
    }
  }
  return g;
}

std::string ToDot(const Graph& g) {
  uint32_t top = 1;
  for (const auto& e : g.edges)
    if (e.kind == "transition") top = std::max(top, e.stats.uses());
  std::ostringstream o;
  o << "digraph htg {\n"
    << "  graph [rankdir=LR, fontname=\"Helvetica\", label=\"htam: directions and what tends to "
       "come next\\n"
       "edge label: times taken | success rate | mean gain factor; width = experience\", "
       "labelloc=t, fontsize=16, nodesep=0.3, ranksep=0.9];\n"
    << "  node [fontname=\"Helvetica\", fontsize=11];\n"
    << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  // Directions nobody has taken yet sit apart, so the experience stands out.
  std::set<std::string> linked;
  for (const auto& e : g.edges) linked.insert(e.from), linked.insert(e.to);
  bool any_unused = false;
  for (const auto& n : g.nodes)
    any_unused = any_unused || (n.kind == "direction" && !linked.count(n.id));
  if (any_unused) {
    o << "  subgraph cluster_untried {\n    label=\"not tried yet\"; style=dashed; "
         "color=\"#9e9e9e\"; fontsize=11;\n";
    for (const auto& n : g.nodes)
      if (n.kind == "direction" && !linked.count(n.id))
        o << "    " << n.id << " [label=" << DotQuote(n.name)
          << ", shape=box, style=\"rounded,filled\", fillcolor=\"" << Fill(n.stats) << "\"];\n";
    o << "  }\n";
  }
  for (const auto& n : g.nodes) {
    if (n.kind == "direction" && !linked.count(n.id)) continue;
    if (n.kind == "start") {
      o << "  start [label=\"start\", shape=circle, style=filled, fillcolor=\"#bbdefb\"];\n";
    } else if (n.kind == "direction") {
      o << "  " << n.id << " [label=" << DotQuote(n.name + "\n" + StatsLine(n.stats))
        << ", shape=box, style=\"rounded,filled\", fillcolor=\"" << Fill(n.stats) << "\"];\n";
    } else {
      o << "  " << n.id << " [label=" << DotQuote(n.name + "\n" + StatsLine(n.stats))
        << ", shape=note, style=filled, fontsize=9, fillcolor=\"" << Fill(n.stats) << "\"];\n";
    }
  }
  for (const auto& e : g.edges) {
    if (e.kind == "contains") {
      o << "  " << e.from << " -> " << e.to
        << " [style=dashed, color=\"#9e9e9e\", arrowhead=none];\n";
      continue;
    }
    double w = 1.0 + 5.0 * e.stats.uses() / top;
    double gain = MeanGain(e.stats);
    o << "  " << e.from << " -> " << e.to << " [penwidth=" << Fixed(w, 2) << ", color=\""
      << EdgeColor(e.stats)
      << "\", label="
      << DotQuote(std::to_string(e.stats.uses()) + " | " + Fixed(100 * SuccessRate(e.stats), 0) +
                  "% | " + GainFactor(gain))
      << ", weight=" << e.stats.uses() << "];\n";
  }
  o << "}\n";
  return o.str();
}

std::string ToGraphMl(const Graph& g) {
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
       "<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\">\n"
       "  <key id=\"kind\" for=\"all\" attr.name=\"kind\" attr.type=\"string\"/>\n"
       "  <key id=\"name\" for=\"node\" attr.name=\"name\" attr.type=\"string\"/>\n"
       "  <key id=\"title\" for=\"node\" attr.name=\"title\" attr.type=\"string\"/>\n"
       "  <key id=\"record_id\" for=\"node\" attr.name=\"record_id\" attr.type=\"long\"/>\n"
       "  <key id=\"uses\" for=\"all\" attr.name=\"uses\" attr.type=\"int\"/>\n"
       "  <key id=\"successes\" for=\"all\" attr.name=\"successes\" attr.type=\"int\"/>\n"
       "  <key id=\"success_rate\" for=\"all\" attr.name=\"success_rate\" attr.type=\"double\"/>\n"
       "  <key id=\"mean_gain\" for=\"all\" attr.name=\"mean_gain\" attr.type=\"double\"/>\n"
       "  <graph id=\"htg\" edgedefault=\"directed\">\n";
  auto stats = [&](const fb::GainStats& s) {
    o << "      <data key=\"uses\">" << s.uses() << "</data>\n"
      << "      <data key=\"successes\">" << s.successes() << "</data>\n"
      << "      <data key=\"success_rate\">" << Fixed(SuccessRate(s), 6) << "</data>\n"
      << "      <data key=\"mean_gain\">" << Fixed(MeanGain(s), 6) << "</data>\n";
  };
  for (const auto& n : g.nodes) {
    o << "    <node id=\"" << XmlEscape(n.id) << "\">\n"
      << "      <data key=\"kind\">" << n.kind << "</data>\n"
      << "      <data key=\"name\">" << XmlEscape(n.name) << "</data>\n"
      << "      <data key=\"title\">" << XmlEscape(n.title) << "</data>\n"
      << "      <data key=\"record_id\">" << n.record_id << "</data>\n";
    stats(n.stats);
    o << "    </node>\n";
  }
  int i = 0;
  for (const auto& e : g.edges) {
    o << "    <edge id=\"e" << i++ << "\" source=\"" << XmlEscape(e.from) << "\" target=\""
      << XmlEscape(e.to) << "\">\n"
      << "      <data key=\"kind\">" << e.kind << "</data>\n";
    stats(e.stats);
    o << "    </edge>\n";
  }
  o << "  </graph>\n</graphml>\n";
  return o.str();
}

Json ToGraphJson(const Graph& g) {
  Json nodes = Json::array(), edges = Json::array();
  for (const auto& n : g.nodes)
    nodes.push_back(Json{{"id", n.id},
                         {"kind", n.kind},
                         {"name", n.name},
                         {"title", n.title},
                         {"record_id", n.record_id},
                         {"stats", ToJson(n.stats)}});
  for (const auto& e : g.edges)
    edges.push_back(Json{{"from", e.from},
                         {"to", e.to},
                         {"kind", e.kind},
                         {"stats", ToJson(e.stats)},
                         {"success_rate", SuccessRate(e.stats)},
                         {"mean_gain", MeanGain(e.stats)}});
  return Json{{"nodes", nodes}, {"edges", edges}};
}

Status RenderDot(const std::string& dot, const std::string& format, const std::string& out) {
  if (format != "svg" && format != "png")
    return Status::InvalidArgument("--render must be svg or png");
  // dot reads the graph from a file of its own: nothing to feed through a pipe.
  const char* tmpdir = std::getenv("TMPDIR");
  std::string templ = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/htam-graph-XXXXXX";
  std::vector<char> name(templ.begin(), templ.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0) return Status::IOError(templ + ": " + std::strerror(errno));
  const std::string input(name.data());
  size_t off = 0;
  while (off < dot.size()) {
    ssize_t n = ::write(fd, dot.data() + off, dot.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  if (off < dot.size()) {
    ::unlink(input.c_str());
    return Status::IOError("cannot write " + input);
  }
  ProcessOptions opts;
  opts.stderr_to = StderrTo::kParent;  // dot's own complaints reach the user
  opts.own_group = false;               // a Ctrl-C stops it with us
  auto r = RunProcess({"dot", "-T" + format, "-o" + out, input}, opts);
  ::unlink(input.c_str());
  if (!r.ok() && r.status().code() == Status::Code::kUnavailable)
    return Status::NotFound(
        "Graphviz 'dot' is not installed: use --format dot and render elsewhere");
  HTAM_RETURN_IF_ERROR(r.status());
  if (r->signaled || r->timed_out || r->exit_code != 0)
    return Status::Internal("dot failed to render " + out);
  return Status::OK();
}

int CmdGraph(Context& c) {
  po::options_description o("graph options");
  std::string format = "dot", render, out;
  GraphOptions go;
  bool connected_only = false, all = false;
  go.min_count = 2;
  o.add_options()("format", po::value(&format)->default_value("dot"), "dot | json | graphml")(
      "expand", po::value(&go.expand), "draw this direction's strategies too (name or id)")(
      "min-count", po::value(&go.min_count)->default_value(2),
      "leave out edges seen fewer times (--all: 1)")(
      "connected-only", po::bool_switch(&connected_only),
      "leave out directions without edges (the default; --all draws them)")(
      "all", po::bool_switch(&all),
      "the full picture: every edge (--min-count 1 unless given) and every direction")(
      "render", po::value(&render), "svg | png: draw with Graphviz dot (needs -o)")(
      "output,o", po::value(&out), "write to this file instead of stdout");
  po::variables_map vm;
  bool done;
  int rc = Parse(c,
                 "[--format dot|json|graphml] [--expand DIRECTION] [--min-count N] [--all] "
                 "[--render svg|png -o FILE]",
                 o, {}, &vm, &done);
  if (done) return rc;
  go.include_unused = all && !connected_only;
  if (all && vm["min-count"].defaulted()) go.min_count = 1;
  if (c.g.json) format = "json";
  if (format != "dot" && format != "json" && format != "graphml") {
    c.err << "htam graph: --format must be dot, json or graphml\n";
    return kExitUsage;
  }
  if (!render.empty() && out.empty()) {
    c.err << "htam graph: --render needs -o FILE\n";
    return kExitUsage;
  }
  auto src = OpenSource(c);
  if (!src.ok()) return Fail(c, src.status());
  auto g = BuildGraph(**src, go);
  if (!g.ok()) return Fail(c, g.status());
  if (!render.empty()) {
    Status s = RenderDot(ToDot(*g), render, out);
    if (!s.ok()) return Fail(c, s);
    c.out << "rendered " << g->nodes.size() << " nodes and " << g->edges.size() << " edges to "
          << out << "\n";
    return kExitOk;
  }
  std::string text = format == "dot"       ? ToDot(*g)
                     : format == "graphml" ? ToGraphMl(*g)
                                           : ToGraphJson(*g).dump(2) + "\n";
  if (out.empty()) {
    c.out << text;
    return kExitOk;
  }
  Status s = WriteTextFile(out, text);
  if (!s.ok()) return Fail(c, s);
  c.out << "wrote " << format << " (" << g->nodes.size() << " nodes, " << g->edges.size()
        << " edges) to " << out << "\n";
  return kExitOk;
}

}  // namespace htam::cli
