// task.json parsing and checking; see task_spec.h.
#include "daemon/eval/gate/task_spec.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/hash.h"

namespace htam {
namespace {

// Recursive-descent evaluator; with dims == nullptr it only checks syntax and names.
class ExprParser {
 public:
  ExprParser(std::string_view text, const DimBinding* dims, const std::vector<std::string>* names)
      : s_(text), dims_(dims), names_(names) {}

  Status Run(double* value) {
    double v = 0;
    HTAM_RETURN_IF_ERROR(Sum(&v));
    Skip();
    if (pos_ != s_.size()) return Error("unexpected '" + std::string(1, s_[pos_]) + "'");
    *value = v;
    return Status::OK();
  }
  std::vector<std::string> used;

 private:
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  Status Error(const std::string& what) const {
    return Status::InvalidArgument("bad expression '" + std::string(s_) + "': " + what);
  }
  Status Sum(double* v) {
    HTAM_RETURN_IF_ERROR(Product(v));
    for (;;) {
      Skip();
      if (pos_ >= s_.size() || (s_[pos_] != '+' && s_[pos_] != '-')) return Status::OK();
      char op = s_[pos_++];
      double r = 0;
      HTAM_RETURN_IF_ERROR(Product(&r));
      *v = op == '+' ? *v + r : *v - r;
    }
  }
  Status Product(double* v) {
    HTAM_RETURN_IF_ERROR(Unary(v));
    for (;;) {
      Skip();
      if (pos_ >= s_.size() || (s_[pos_] != '*' && s_[pos_] != '/')) return Status::OK();
      char op = s_[pos_++];
      double r = 0;
      HTAM_RETURN_IF_ERROR(Unary(&r));
      if (op == '*') {
        *v *= r;
      } else {
        if (dims_ && r == 0) return Error("division by zero");
        *v = dims_ ? *v / r : *v;
      }
    }
  }
  Status Unary(double* v) {
    Skip();
    if (pos_ < s_.size() && s_[pos_] == '-') {
      ++pos_;
      HTAM_RETURN_IF_ERROR(Unary(v));
      *v = -*v;
      return Status::OK();
    }
    return Primary(v);
  }
  Status Primary(double* v) {
    Skip();
    if (pos_ >= s_.size()) return Error("unexpected end");
    char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      HTAM_RETURN_IF_ERROR(Sum(v));
      Skip();
      if (pos_ >= s_.size() || s_[pos_] != ')') return Error("missing ')'");
      ++pos_;
      return Status::OK();
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t start = pos_;
      while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) ||
                                  s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
        ++pos_;
      std::string num(s_.substr(start, pos_ - start));
      char* end = nullptr;
      *v = std::strtod(num.c_str(), &end);
      if (end == num.c_str() || *end != '\0') return Error("bad number '" + num + "'");
      return Status::OK();
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos_;
      while (pos_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
        ++pos_;
      std::string name(s_.substr(start, pos_ - start));
      used.push_back(name);
      if (names_) {
        bool known = false;
        for (const auto& n : *names_) known |= n == name;
        if (!known) return Error("unknown name '" + name + "'");
      }
      if (dims_) {
        auto it = dims_->find(name);
        if (it == dims_->end()) return Error("unbound name '" + name + "'");
        *v = static_cast<double>(it->second);
      } else {
        *v = 1;
      }
      return Status::OK();
    }
    return Error("unexpected '" + std::string(1, c) + "'");
  }

  std::string_view s_;
  size_t pos_ = 0;
  const DimBinding* dims_;
  const std::vector<std::string>* names_;
};

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

using json = nlohmann::json;

// Field access with errors that name file and field.
struct Ctx {
  std::string file;
  Status Err(const std::string& field, const std::string& what) const {
    return Status::InvalidArgument(file + ": " + field + ": " + what);
  }
};

Status GetString(const Ctx& c, const json& j, const std::string& key, const std::string& field,
                 bool required, std::string* out) {
  if (!j.contains(key)) {
    return required ? c.Err(field, "missing") : Status::OK();
  }
  if (!j[key].is_string()) return c.Err(field, "must be a string");
  *out = j[key].get<std::string>();
  return Status::OK();
}

Status GetNumber(const Ctx& c, const json& j, const std::string& key, const std::string& field,
                 double* out) {
  if (!j.contains(key)) return Status::OK();
  if (!j[key].is_number()) return c.Err(field, "must be a number");
  *out = j[key].get<double>();
  if (!std::isfinite(*out)) return c.Err(field, "must be finite");
  return Status::OK();
}

Result<Expr> ParseExprField(const Ctx& c, const json& v, const std::string& field,
                            const std::vector<std::string>& dims) {
  std::string text;
  if (v.is_number_integer()) {
    text = std::to_string(v.get<int64_t>());
  } else if (v.is_string()) {
    text = v.get<std::string>();
  } else {
    return c.Err(field, "must be a string expression or an integer");
  }
  auto e = Expr::Parse(text, &dims);
  if (!e.ok()) return c.Err(field, e.status().message());
  return e;
}

Status ParseInit(const Ctx& c, const json& j, const std::string& field, htam_dtype dtype,
                 InitSpec* init) {
  if (!j.is_object()) return c.Err(field, "must be an object");
  std::string dist = "normal";
  HTAM_RETURN_IF_ERROR(GetString(c, j, "dist", field + ".dist", false, &dist));
  if (dist == "normal") {
    init->dist = InitSpec::Dist::kNormal;
    init->a = 0;
    init->b = 1;
    HTAM_RETURN_IF_ERROR(GetNumber(c, j, "mean", field + ".mean", &init->a));
    HTAM_RETURN_IF_ERROR(GetNumber(c, j, "std", field + ".std", &init->b));
    if (init->b <= 0) return c.Err(field + ".std", "must be positive");
  } else if (dist == "uniform" || dist == "randint") {
    init->dist = dist == "uniform" ? InitSpec::Dist::kUniform : InitSpec::Dist::kRandint;
    init->a = dist == "uniform" ? -1 : -8;
    init->b = dist == "uniform" ? 1 : 8;
    HTAM_RETURN_IF_ERROR(GetNumber(c, j, "low", field + ".low", &init->a));
    HTAM_RETURN_IF_ERROR(GetNumber(c, j, "high", field + ".high", &init->b));
    if (init->b <= init->a) return c.Err(field, "high must exceed low");
  } else {
    return c.Err(field + ".dist", "unknown distribution '" + dist + "' (normal, uniform, randint)");
  }
  if (j.contains("special")) {
    if (!j["special"].is_array()) return c.Err(field + ".special", "must be an array of numbers");
    for (const auto& v : j["special"]) {
      if (!v.is_number()) return c.Err(field + ".special", "must be an array of numbers");
      init->special.push_back(v.get<double>());
    }
  }
  HTAM_RETURN_IF_ERROR(
      GetNumber(c, j, "special_fraction", field + ".special_fraction", &init->special_fraction));
  if (init->special_fraction < 0 || init->special_fraction > 0.5)
    return c.Err(field + ".special_fraction", "must be in [0, 0.5]");
  (void)dtype;
  return Status::OK();
}

Status ParseTensors(const Ctx& c, const json& root, const std::string& key,
                    const std::vector<std::string>& dims, bool with_init,
                    std::vector<TensorSpec>* out) {
  if (!root.contains(key) || !root[key].is_array() || root[key].empty())
    return c.Err(key, "missing or empty (an array of tensors)");
  std::set<std::string> names;
  for (size_t i = 0; i < root[key].size(); ++i) {
    const json& t = root[key][i];
    std::string f = key + "[" + std::to_string(i) + "]";
    if (!t.is_object()) return c.Err(f, "must be an object");
    TensorSpec ts;
    HTAM_RETURN_IF_ERROR(GetString(c, t, "name", f + ".name", true, &ts.name));
    if (!names.insert(ts.name).second) return c.Err(f + ".name", "duplicate '" + ts.name + "'");
    std::string dtype;
    HTAM_RETURN_IF_ERROR(GetString(c, t, "dtype", f + ".dtype", true, &dtype));
    if (!ParseDtype(dtype, &ts.dtype))
      return c.Err(f + ".dtype",
                   "unknown dtype '" + dtype + "' (f32 f16 bf16 f64 i32 i64 u8 i8 bool)");
    if (!t.contains("shape") || !t["shape"].is_array() || t["shape"].empty())
      return c.Err(f + ".shape", "missing or empty");
    if (t["shape"].size() > HTAM_MAX_DIMS)
      return c.Err(f + ".shape", "more than " + std::to_string(HTAM_MAX_DIMS) + " dimensions");
    for (size_t d = 0; d < t["shape"].size(); ++d) {
      HTAM_ASSIGN_OR_RETURN(
          Expr e, ParseExprField(c, t["shape"][d], f + ".shape[" + std::to_string(d) + "]", dims));
      ts.shape.push_back(std::move(e));
    }
    if (with_init) {
      if (t.contains("init")) {
        HTAM_RETURN_IF_ERROR(ParseInit(c, t["init"], f + ".init", ts.dtype, &ts.init));
      } else if (ts.dtype == HTAM_BOOL || ts.dtype == HTAM_U8) {
        ts.init.dist = InitSpec::Dist::kRandint;
        ts.init.a = 0;
        ts.init.b = ts.dtype == HTAM_BOOL ? 1 : 255;
      }
    }
    out->push_back(std::move(ts));
  }
  return Status::OK();
}

Status ParseShapeSets(const Ctx& c, const json& root, const std::vector<std::string>& dims,
                      const std::string& which, bool required, std::vector<DimBinding>* out) {
  std::string f = "shapes." + which;
  if (!root.contains("shapes") || !root["shapes"].is_object())
    return c.Err("shapes", "missing (an object with seen and held_out)");
  const json& s = root["shapes"];
  if (!s.contains(which)) return required ? c.Err(f, "missing") : Status::OK();
  if (!s[which].is_array()) return c.Err(f, "must be an array of {dim: value}");
  if (required && s[which].empty()) return c.Err(f, "must not be empty");
  for (size_t i = 0; i < s[which].size(); ++i) {
    const json& b = s[which][i];
    std::string fi = f + "[" + std::to_string(i) + "]";
    if (!b.is_object()) return c.Err(fi, "must be an object {dim: value}");
    DimBinding binding;
    for (auto it = b.begin(); it != b.end(); ++it) {
      bool known = false;
      for (const auto& d : dims) known |= d == it.key();
      if (!known) return c.Err(fi + "." + it.key(), "not a declared dim");
      if (!it.value().is_number_integer() || it.value().get<int64_t>() <= 0)
        return c.Err(fi + "." + it.key(), "must be a positive integer");
      binding[it.key()] = it.value().get<int64_t>();
    }
    for (const auto& d : dims)
      if (!binding.count(d)) return c.Err(fi, "dim '" + d + "' is not bound");
    out->push_back(std::move(binding));
  }
  return Status::OK();
}

}  // namespace

Result<Expr> Expr::Parse(std::string_view text, const std::vector<std::string>* names) {
  ExprParser p(text, nullptr, names);
  double v = 0;
  HTAM_RETURN_IF_ERROR(p.Run(&v));
  Expr e;
  e.text_ = std::string(text);
  return e;
}

Result<double> Expr::Eval(const DimBinding& dims) const {
  ExprParser p(text_, &dims, nullptr);
  double v = 0;
  HTAM_RETURN_IF_ERROR(p.Run(&v));
  return v;
}

std::vector<std::string> Expr::Names() const {
  ExprParser p(text_, nullptr, nullptr);
  double v = 0;
  (void)p.Run(&v);
  return p.used;
}

bool ParseDtype(std::string_view text, htam_dtype* out) {
  static const std::pair<const char*, htam_dtype> kTable[] = {
      {"f32", HTAM_F32}, {"f16", HTAM_F16}, {"bf16", HTAM_BF16},
      {"f64", HTAM_F64}, {"i32", HTAM_I32}, {"i64", HTAM_I64},
      {"u8", HTAM_U8},   {"i8", HTAM_I8},   {"bool", HTAM_BOOL}};
  for (const auto& [name, d] : kTable) {
    if (text == name) {
      *out = d;
      return true;
    }
  }
  return false;
}

const char* DtypeName(htam_dtype dtype) {
  switch (dtype) {
    case HTAM_F32: return "f32";
    case HTAM_F16: return "f16";
    case HTAM_BF16: return "bf16";
    case HTAM_F64: return "f64";
    case HTAM_I32: return "i32";
    case HTAM_I64: return "i64";
    case HTAM_U8: return "u8";
    case HTAM_I8: return "i8";
    case HTAM_BOOL: return "bool";
  }
  return "?";
}

std::vector<int64_t> TaskSpec::Shape(const TensorSpec& t, const DimBinding& dims) const {
  std::vector<int64_t> out;
  for (const auto& e : t.shape) {
    auto v = e.Eval(dims);
    out.push_back(v.ok() ? static_cast<int64_t>(std::llround(*v)) : 0);
  }
  return out;
}

Result<std::string> TaskSpec::ReferencePath(std::string_view backend) const {
  auto it = references.find(std::string(backend));
  if (it == references.end())
    return Status::NotFound("task '" + name + "' has no reference for backend '" +
                            std::string(backend) + "'");
  return dir + "/" + it->second;
}

Result<TaskSpec> ParseTaskJson(std::string_view json_text, const std::string& dir,
                               const std::string& file_label, uint64_t max_case_bytes) {
  Ctx c{file_label};
  json root;
  try {
    root = json::parse(json_text);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(file_label + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) return c.Err("(root)", "must be an object");
  TaskSpec t;
  t.dir = dir;
  t.spec_hash = SpecKey(json_text);
  HTAM_RETURN_IF_ERROR(GetString(c, root, "name", "name", true, &t.name));
  HTAM_RETURN_IF_ERROR(GetString(c, root, "category", "category", false, &t.category));
  HTAM_RETURN_IF_ERROR(GetString(c, root, "description", "description", false, &t.description));
  if (!root.contains("dims") || !root["dims"].is_array()) return c.Err("dims", "missing (array)");
  for (size_t i = 0; i < root["dims"].size(); ++i) {
    const json& d = root["dims"][i];
    if (!d.is_string() || d.get<std::string>().empty())
      return c.Err("dims[" + std::to_string(i) + "]", "must be a name");
    t.dims.push_back(d.get<std::string>());
  }
  HTAM_RETURN_IF_ERROR(ParseTensors(c, root, "inputs", t.dims, true, &t.inputs));
  HTAM_RETURN_IF_ERROR(ParseTensors(c, root, "outputs", t.dims, false, &t.outputs));
  HTAM_RETURN_IF_ERROR(ParseShapeSets(c, root, t.dims, "seen", true, &t.seen_shapes));
  HTAM_RETURN_IF_ERROR(ParseShapeSets(c, root, t.dims, "held_out", false, &t.held_out_shapes));
  // Every tensor dimension must be a positive integer in every shape set.
  auto check_sets = [&](const std::vector<DimBinding>& sets, const std::string& which) -> Status {
    for (size_t s = 0; s < sets.size(); ++s) {
      uint64_t case_bytes = 0, group_bytes[2] = {0, 0};
      for (const auto* group : {&t.inputs, &t.outputs}) {
        uint64_t& in_group = group_bytes[group == &t.outputs];
        for (const auto& ts : *group) {
          uint64_t n = 1;
          for (size_t d = 0; d < ts.shape.size(); ++d) {
            auto v = ts.shape[d].Eval(sets[s]);
            std::string f = "shapes." + which + "[" + std::to_string(s) + "]";
            if (!v.ok()) return c.Err(f, "tensor '" + ts.name + "': " + v.status().message());
            if (*v < 1 || *v != std::floor(*v))
              return c.Err(f, "shape mismatch: tensor '" + ts.name + "' dimension " +
                                  std::to_string(d) + " ('" + ts.shape[d].text() +
                                  "') evaluates to " + std::to_string(*v) +
                                  ", not a positive integer");
            n *= static_cast<uint64_t>(*v);
          }
          case_bytes += n * static_cast<uint64_t>(htam_dtype_size(ts.dtype));
          in_group += n * static_cast<uint64_t>(htam_dtype_size(ts.dtype));
        }
      }
      t.case_input_bytes = std::max(t.case_input_bytes, group_bytes[0]);
      t.case_output_bytes = std::max(t.case_output_bytes, group_bytes[1]);
      if (max_case_bytes && case_bytes > max_case_bytes)
        return c.Err("shapes." + which + "[" + std::to_string(s) + "]",
                     "tensors need " + std::to_string(case_bytes) + " bytes, over the limit of " +
                         std::to_string(max_case_bytes) +
                         " (eval.max_case_mb): this task cannot be evaluated here");
    }
    return Status::OK();
  };
  HTAM_RETURN_IF_ERROR(check_sets(t.seen_shapes, "seen"));
  HTAM_RETURN_IF_ERROR(check_sets(t.held_out_shapes, "held_out"));
  if (root.contains("tolerance")) {
    const json& tol = root["tolerance"];
    if (!tol.is_object()) return c.Err("tolerance", "must be an object");
    HTAM_RETURN_IF_ERROR(GetNumber(c, tol, "rtol", "tolerance.rtol", &t.tolerance.rtol));
    HTAM_RETURN_IF_ERROR(GetNumber(c, tol, "atol", "tolerance.atol", &t.tolerance.atol));
    HTAM_RETURN_IF_ERROR(
        GetNumber(c, tol, "bad_budget", "tolerance.bad_budget", &t.tolerance.bad_budget));
    if (t.tolerance.rtol < 0 || t.tolerance.atol < 0)
      return c.Err("tolerance", "rtol and atol must be >= 0");
    if (t.tolerance.bad_budget < 0 || t.tolerance.bad_budget > 0.1)
      return c.Err("tolerance.bad_budget", "must be in [0, 0.1]");
  }
  for (const char* key : {"flops", "bytes"}) {
    if (!root.contains(key)) return c.Err(key, "missing (an expression over dims)");
    HTAM_ASSIGN_OR_RETURN(Expr e, ParseExprField(c, root[key], key, t.dims));
    (std::string(key) == "flops" ? t.flops : t.bytes) = std::move(e);
  }
  HTAM_RETURN_IF_ERROR(GetString(c, root, "kernelbench", "kernelbench", false, &t.kernelbench));
  if (!t.kernelbench.empty() &&
      (t.kernelbench.find("..") != std::string::npos || t.kernelbench[0] == '/'))
    return c.Err("kernelbench", "must be a relative path inside the task directory");
  if (!t.kernelbench.empty() && t.seen_shapes.size() != 1)
    return c.Err("shapes.seen", "a KernelBench task has exactly one (fixed) shape set");
  if (!t.kernelbench.empty() && !t.held_out_shapes.empty())
    return c.Err("shapes.held_out", "a KernelBench task has no held-out shapes (one fixed set)");
  if (t.kernelbench.empty() ? (!root.contains("references") || !root["references"].is_object() ||
                               root["references"].empty())
                            : (root.contains("references") && !root["references"].is_object()))
    return c.Err("references", "missing reference (an object backend -> file)");
  const json no_refs = json::object();
  const json& refs = root.contains("references") ? root["references"] : no_refs;
  for (auto it = refs.begin(); it != refs.end(); ++it) {
    std::string f = "references." + it.key();
    if (!it.value().is_string()) return c.Err(f, "must be a file name");
    std::string file = it.value().get<std::string>();
    if (file.empty() || file.find("..") != std::string::npos || file[0] == '/')
      return c.Err(f, "must be a relative path inside the task directory");
    t.references[it.key()] = file;
  }
  HTAM_RETURN_IF_ERROR(GetString(c, root, "lineage", "lineage", false, &t.lineage));
  return t;
}

Result<TaskSpec> ParseTaskFile(const std::string& dir, uint64_t max_case_bytes) {
  std::string path = dir + "/task.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  HTAM_ASSIGN_OR_RETURN(TaskSpec t, ParseTaskJson(ss.str(), dir, path, max_case_bytes));
  if (!t.kernelbench.empty() && !FileExists(dir + "/" + t.kernelbench))
    return Status::InvalidArgument(path + ": kernelbench: missing problem file '" + t.kernelbench +
                                   "'");
  // A listed reference that does not exist is an error of the task, found at load time.
  for (const auto& [backend, file] : t.references) {
    if (!FileExists(dir + "/" + file))
      return Status::InvalidArgument(path + ": references." + backend +
                                     ": missing reference file '" + file + "'");
  }
  return t;
}

}  // namespace htam
