// The HTG as a picture: level-1 directions with transition edges weighted by experience,
// optionally one direction expanded into its strategies. Written as DOT, JSON or GraphML, and
// rendered to SVG or PNG through Graphviz `dot` when it is installed.
// Thread-safety: plain functions.
#pragma once

#include <string>
#include <vector>

#include "tools/cli/inspect_util.h"

namespace htam::cli {

struct GraphNode {
  std::string id;    // "d3", "s12", "start"
  std::string kind;  // direction | strategy | start
  std::string name, title;
  fb::GainStats stats;
  uint64_t record_id = 0;
};
struct GraphEdge {
  std::string from, to;
  std::string kind;  // transition | contains
  fb::GainStats stats;
};
struct Graph {
  std::vector<GraphNode> nodes;
  std::vector<GraphEdge> edges;
};

struct GraphOptions {
  std::string expand;          // direction (name or id) whose strategies are drawn; "" = none
  uint32_t min_count = 1;      // transition edges seen fewer times are left out
  bool include_unused = true;  // directions without any edge are drawn too
};

Result<Graph> BuildGraph(Source& src, const GraphOptions& o);
std::string ToDot(const Graph& g);
std::string ToGraphMl(const Graph& g);
Json ToGraphJson(const Graph& g);
// Runs `dot -T<format> -o out` with the DOT text on its stdin. NotFound when dot is missing.
Status RenderDot(const std::string& dot, const std::string& format, const std::string& out);

}  // namespace htam::cli
