// A session's speedup per step drawn as a self-contained SVG (no plotting library): the
// speedup of each step's candidate as points coloured by outcome, the best-so-far as a step line,
// the baseline (1x) dashed. Deterministic text: the same trajectory gives the same bytes.
// Thread-safety: pure function.
#pragma once

#include <string>

#include "tools/cli/inspect_util.h"

namespace htam::cli {

std::string SpeedupSvg(const Trajectory& t);

// Escapes text for XML attributes and content.
std::string XmlEscape(const std::string& s);

}  // namespace htam::cli
