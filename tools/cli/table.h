// Plain-text tables for the CLI's default output: a header row, aligned columns (numbers right,
// text left), long cells cut with an ellipsis so a table stays readable in a terminal.
// Thread-safety: a Table is a value; external synchronization required.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace htam::cli {

class Table {
 public:
  // A column whose title starts with '>' is right-aligned (the '>' is not printed).
  explicit Table(std::vector<std::string> columns, size_t max_width = 48);
  void Add(std::vector<std::string> row);
  size_t rows() const { return rows_.size(); }
  void Print(std::ostream& out) const;

 private:
  std::vector<std::string> columns_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
  size_t max_width_;
};

// Fixed-precision numbers for tables (no locale, no exponent for ordinary values).
std::string Fixed(double v, int digits = 2);
// "1.23x" for a speedup; "-" for 0 (did not run).
std::string Speedup(double v);
// exp(log gain) as a factor: "x1.21".
std::string GainFactor(double log_gain);

}  // namespace htam::cli
