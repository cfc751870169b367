// Plain-text tables and number formatting of the CLI.
#include "tools/cli/table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace htam::cli {
namespace {
// Display width of UTF-8 text (counts code points; good enough for the CLI's own symbols).
size_t Width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}
std::string Cut(const std::string& s, size_t max) {
  if (Width(s) <= max || max < 4) return s;
  std::string out;
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80 && ++n > max - 3) break;
    out.push_back(s[i]);
  }
  return out + "...";
}
}  // namespace

Table::Table(std::vector<std::string> columns, size_t max_width) : max_width_(max_width) {
  for (auto& c : columns) {
    bool right = !c.empty() && c[0] == '>';
    right_.push_back(right);
    columns_.push_back(right ? c.substr(1) : c);
  }
}

void Table::Add(std::vector<std::string> row) {
  row.resize(columns_.size());
  for (auto& cell : row) {
    for (auto& ch : cell)
      if (ch == '\n' || ch == '\t') ch = ' ';
    cell = Cut(cell, max_width_);
  }
  rows_.push_back(std::move(row));
}

void Table::Print(std::ostream& out) const {
  std::vector<size_t> w(columns_.size());
  for (size_t i = 0; i < columns_.size(); ++i) w[i] = Width(columns_[i]);
  for (const auto& r : rows_)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], Width(r[i]));
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t i = 0; i < r.size(); ++i) {
      std::string pad(w[i] - Width(r[i]), ' ');
      bool last = i + 1 == r.size();
      s += right_[i] ? pad + r[i] : (last ? r[i] : r[i] + pad);
      if (!last) s += "  ";
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << "\n";
  };
  line(columns_);
  for (const auto& r : rows_) line(r);
}

std::string Fixed(double v, int digits) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  std::string s = b;
  if (s == "-0.00" || s == "-0.0" || s == "-0") s = s.substr(1);
  return s;
}

std::string Speedup(double v) {
  return v <= 0 ? "-" : Fixed(v, 2) + "x";
}

std::string GainFactor(double log_gain) {
  return "x" + Fixed(std::exp(log_gain), 2);
}

}  // namespace htam::cli
