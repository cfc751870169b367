// SpeedupSvg: the trajectory plot of `htam trajectory --plot`.
#include "tools/cli/plot.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tools/cli/table.h"

namespace htam::cli {
namespace {
constexpr double kW = 720, kH = 400;                                // canvas
constexpr double kLeft = 64, kRight = 24, kTop = 48, kBottom = 56;  // margins

std::string Color(const std::string& status) {
  if (status == "Ok") return "#2e7d32";
  if (status == "Unverified") return "#757575";
  if (status == "CompileError") return "#ef6c00";
  if (status == "Incorrect" || status == "Nondeterministic") return "#c62828";
  return "#6a1b9a";  // crash, timeout, resource limit, infrastructure
}

// A "nice" tick step for a range (1, 2 or 5 times a power of ten).
double TickStep(double range, int want) {
  double raw = range / std::max(1, want);
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}
}  // namespace

std::string XmlEscape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(ch) >= 0x20 || ch == '\t') o += ch;
    }
  }
  return o;
}

std::string SpeedupSvg(const Trajectory& t) {
  const auto& steps = t.steps;
  double ymax = 1.0;
  for (const auto& s : steps) ymax = std::max({ymax, s.after, s.best});
  double ystep = TickStep(ymax, 5);
  ymax = std::ceil(ymax / ystep) * ystep;
  if (ymax <= 1.0) ymax = 1.0 + ystep;
  const double ymin = 0;
  size_t n = std::max<size_t>(steps.size(), 1);
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  // Each step in the middle of its own slot, so no point sits on an axis.
  auto X = [&](size_t i) {
    return kLeft + pw * (static_cast<double>(i) + 0.5) / static_cast<double>(n);
  };
  auto Y = [&](double v) { return kTop + ph * (1 - (v - ymin) / (ymax - ymin)); };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH
    << "\" viewBox=\"0 0 " << kW << " " << kH
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string title = "session " + std::to_string(t.session.id) + ": " + t.session.task_name +
                      " on " + t.session.backend +
                      (t.session.arch.empty() ? "" : " " + t.session.arch) + ", best " +
                      Speedup(t.session.best_speedup);
  o << "<text x=\"" << kW / 2
    << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">"
    << XmlEscape(title) << "</text>\n";
  // Grid and y ticks.
  for (double v = ymin; v <= ymax + 1e-9; v += ystep) {
    o << "<line x1=\"" << kLeft << "\" x2=\"" << kW - kRight << "\" y1=\"" << Fixed(Y(v), 1)
      << "\" y2=\"" << Fixed(Y(v), 1) << "\" stroke=\"#e0e0e0\"/>\n";
    o << "<text x=\"" << kLeft - 8 << "\" y=\"" << Fixed(Y(v) + 4, 1) << "\" text-anchor=\"end\">"
      << Fixed(v, ystep < 1 ? 1 : 0) << "x</text>\n";
  }
  // Axes.
  o << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop << "\" y2=\""
    << kH - kBottom << "\" stroke=\"black\"/>\n";
  o << "<line x1=\"" << kLeft << "\" x2=\"" << kW - kRight << "\" y1=\"" << kH - kBottom
    << "\" y2=\"" << kH - kBottom << "\" stroke=\"black\"/>\n";
  o << "<text x=\"" << kW / 2 << "\" y=\"" << kH - 14 << "\" text-anchor=\"middle\">step</text>\n";
  o << "<text x=\"16\" y=\"" << kTop + ph / 2
    << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " << kTop + ph / 2
    << ")\">speedup over baseline</text>\n";
  // Baseline.
  o << "<line x1=\"" << kLeft << "\" x2=\"" << kW - kRight << "\" y1=\"" << Fixed(Y(1), 1)
    << "\" y2=\"" << Fixed(Y(1), 1) << "\" stroke=\"#9e9e9e\" stroke-dasharray=\"6 4\"/>\n";
  if (steps.empty()) {
    o << "<text x=\"" << kW / 2 << "\" y=\"" << kTop + ph / 2
      << "\" text-anchor=\"middle\">no steps yet</text>\n";
    o << "</svg>\n";
    return o.str();
  }
  // X ticks (every step up to 20, then spaced).
  size_t every = std::max<size_t>(1, (steps.size() + 19) / 20);
  for (size_t i = 0; i < steps.size(); i += every)
    o << "<text x=\"" << Fixed(X(i), 1) << "\" y=\"" << kH - kBottom + 18
      << "\" text-anchor=\"middle\">" << steps[i].step << "</text>\n";
  // Best so far: a step line.
  o << "<polyline fill=\"none\" stroke=\"#1565c0\" stroke-width=\"2.5\" points=\"" << kLeft << ","
    << Fixed(Y(1), 1) << " ";
  for (size_t i = 0; i < steps.size(); ++i) {
    o << Fixed(X(i), 1) << "," << Fixed(Y(i > 0 ? steps[i - 1].best : 1.0), 1) << " ";
    o << Fixed(X(i), 1) << "," << Fixed(Y(steps[i].best), 1) << " ";
  }
  o << kW - kRight << "," << Fixed(Y(steps.back().best), 1) << "\"/>\n";
  // Each step's candidate.
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    double v = s.after > 0 ? s.after : 0;
    o << "<circle cx=\"" << Fixed(X(i), 1) << "\" cy=\"" << Fixed(Y(v), 1) << "\" r=\"5\" fill=\""
      << Color(s.status) << "\"><title>"
      << XmlEscape("step " + std::to_string(s.step) + " " + s.direction + ": " + s.status + " " +
                   Speedup(s.after) + " - " + s.summary)
      << "</title></circle>\n";
  }
  // Legend.
  double lx = kLeft + 12, ly = kTop + 10;
  o << "<rect x=\"" << lx - 6 << "\" y=\"" << ly - 10
    << "\" width=\"132\" height=\"96\" fill=\"white\" "
       "fill-opacity=\"0.85\" stroke=\"#bdbdbd\"/>\n";
  o << "<line x1=\"" << lx << "\" x2=\"" << lx + 24 << "\" y1=\"" << ly << "\" y2=\"" << ly
    << "\" stroke=\"#1565c0\" stroke-width=\"2.5\"/><text x=\"" << lx + 30 << "\" y=\"" << ly + 4
    << "\">best so far</text>\n";
  const char* legend[][2] = {{"Ok", "ok"},
                             {"CompileError", "compile error"},
                             {"Incorrect", "incorrect"},
                             {"Crash", "crash/timeout"}};
  for (int k = 0; k < 4; ++k) {
    double y = ly + 18 * (k + 1);
    o << "<circle cx=\"" << lx + 12 << "\" cy=\"" << y << "\" r=\"5\" fill=\""
      << Color(legend[k][0]) << "\"/><text x=\"" << lx + 30 << "\" y=\"" << y + 4 << "\">"
      << legend[k][1] << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace htam::cli
