// The task specification (configs/tasks/<name>/task.json) as the evaluation host sees it: inputs
// and outputs with dtype, symbolic shape and initial distribution; seen and held-out shape sets;
// tolerances; FLOPs/bytes expressions; references per backend. Parse errors name the file and the
// field ("task.json: inputs[0].dtype: unknown dtype 'f33'").
// Thread-safety: a TaskSpec is an immutable value after parsing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "htam/kernel_abi.h"

namespace htam {

using DimBinding = std::map<std::string, int64_t>;

// An arithmetic expression over dims: + - * / parentheses, numbers, names.
class Expr {
 public:
  // Parses and checks that every name is in `names` (when non-null).
  static Result<Expr> Parse(std::string_view text, const std::vector<std::string>* names);
  // Evaluates with the dims bound; InvalidArgument for an unbound name or division by zero.
  Result<double> Eval(const DimBinding& dims) const;
  const std::string& text() const { return text_; }
  // Names used in the expression.
  std::vector<std::string> Names() const;

 private:
  std::string text_;
};

struct InitSpec {
  enum class Dist { kNormal, kUniform, kRandint };
  Dist dist = Dist::kNormal;
  double a = 0.0;  // mean | low
  double b = 1.0;  // std  | high (randint: inclusive)
  std::vector<double> special;
  double special_fraction = 0.0;
};

struct TensorSpec {
  std::string name;
  htam_dtype dtype = HTAM_F32;
  std::vector<Expr> shape;  // one expression per dimension
  InitSpec init;
};

struct Tolerance {
  double rtol = 1e-5;
  double atol = 1e-6;
  double bad_budget = 0.0;  // fraction of elements allowed outside tolerance
};

struct TaskSpec {
  std::string dir;  // directory holding task.json
  std::string name;
  std::string category;
  std::string description;
  std::vector<std::string> dims;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<DimBinding> seen_shapes;
  std::vector<DimBinding> held_out_shapes;
  Tolerance tolerance;
  Expr flops;
  Expr bytes;
  std::map<std::string, std::string> references;  // backend -> file name relative to dir
  std::string lineage;                            // file name relative to dir; may be empty
  std::string spec_hash;                          // sha256 of the task.json bytes
  // A KernelBench problem file relative to dir ("" = an ordinary task). Such a task may list no
  // references: its golden outputs come from PyTorch (daemon/eval/kernelbench/kernelbench.h).
  std::string kernelbench;
  // The largest case of any shape set: bytes of its inputs, and of its outputs (filled by the
  // parser).
  uint64_t case_input_bytes = 0;
  uint64_t case_output_bytes = 0;

  // Concrete shape of a tensor for a binding (checked positive at parse time).
  std::vector<int64_t> Shape(const TensorSpec& t, const DimBinding& dims) const;
  // Absolute path of the reference for a backend; NotFound naming the backend when absent.
  Result<std::string> ReferencePath(std::string_view backend) const;
};

// Parses <dir>/task.json and checks it completely: dtypes, dims, expressions, every shape set
// binds every dim to a positive integer, every tensor dimension is positive in every shape set,
// each listed reference file exists. `max_case_bytes` (0 = no limit) bounds the total bytes of
// one case's tensors.
Result<TaskSpec> ParseTaskFile(const std::string& dir, uint64_t max_case_bytes = 0);
// Same, from JSON text (file_label names the file in errors; references are checked under dir).
Result<TaskSpec> ParseTaskJson(std::string_view json_text, const std::string& dir,
                               const std::string& file_label, uint64_t max_case_bytes = 0);

// The host bound on a case's tensors (eval.max_case_mb) for a candidate of `language`: none for
// ModelNew files ("kernelbench"), whose golden data stays on the device and whose bound is the
// device's memory (kb_candidate.h).
inline uint64_t HostCaseLimit(std::string_view language, uint64_t max_case_bytes) {
  return language == "kernelbench" ? 0 : max_case_bytes;
}

// "f32" <-> HTAM_F32 ...
bool ParseDtype(std::string_view text, htam_dtype* out);
const char* DtypeName(htam_dtype dtype);

}  // namespace htam
