// task.json → fb::TaskT for the memory store (see task_loader.h).
#include "daemon/server/task_loader.h"

#include <sys/stat.h>

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/file.h"
#include "base/hash.h"
#include "daemon/memory/memory.h"

namespace htam::server {

bool IsTaskName(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  return true;
}

namespace {

// Recursive descent over the expression grammar; errors as values.
class ExprParser {
 public:
  ExprParser(const std::string& s, const std::map<std::string, double>& dims)
      : s_(s), dims_(dims) {}
  Result<double> Parse() {
    double v = Sum();
    Skip();
    if (!error_.empty()) return Status::InvalidArgument(error_);
    if (pos_ != s_.size())
      return Status::InvalidArgument("unexpected '" + s_.substr(pos_) + "' in '" + s_ + "'");
    return v;
  }

 private:
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  double Sum() {
    double v = Product();
    while (error_.empty()) {
      Skip();
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) {
        char op = s_[pos_++];
        double r = Product();
        v = op == '+' ? v + r : v - r;
      } else {
        break;
      }
    }
    return v;
  }
  double Product() {
    double v = Atom();
    while (error_.empty()) {
      Skip();
      if (pos_ < s_.size() && (s_[pos_] == '*' || s_[pos_] == '/')) {
        char op = s_[pos_++];
        double r = Atom();
        v = op == '*' ? v * r : (r == 0 ? 0 : v / r);
      } else {
        break;
      }
    }
    return v;
  }
  double Atom() {
    Skip();
    if (++depth_ > 64) {
      error_ = "expression nested too deeply";
      return 0;
    }
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    if (pos_ >= s_.size()) {
      error_ = "expression '" + s_ + "' ends early";
      return 0;
    }
    char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      double v = Sum();
      Skip();
      if (pos_ >= s_.size() || s_[pos_] != ')') {
        error_ = "missing ')' in '" + s_ + "'";
        return 0;
      }
      ++pos_;
      return v;
    }
    if (c == '-') {
      ++pos_;
      return -Atom();
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t used = 0;
      double v = 0;
      try {
        v = std::stod(s_.substr(pos_), &used);
      } catch (...) {
        error_ = "bad number in '" + s_ + "'";
        return 0;
      }
      pos_ += used;
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = pos_;
      while (pos_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
        ++pos_;
      std::string name = s_.substr(b, pos_ - b);
      auto it = dims_.find(name);
      if (it == dims_.end()) {
        error_ = "unknown dimension '" + name + "' in '" + s_ + "'";
        return 0;
      }
      return it->second;
    }
    error_ = std::string("unexpected '") + c + "' in '" + s_ + "'";
    return 0;
  }

  const std::string& s_;
  const std::map<std::string, double>& dims_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::string error_;
};

}  // namespace

Result<double> EvalDimExpression(const std::string& expr,
                                 const std::map<std::string, double>& dims) {
  return ExprParser(expr, dims).Parse();
}

Result<fb::TaskT> LoadTaskDir(const std::string& dir) {
  struct stat st;
  const std::string path = dir + "/task.json";
  if (::stat(path.c_str(), &st) != 0) return Status::NotFound("no " + path);
  std::string text;
  if (!ReadWholeFile(path, &text)) return Status::NotFound("cannot read " + path);
  try {
    auto j = nlohmann::json::parse(text);
    fb::TaskT t;
    t.name = j.at("name").get<std::string>();
    t.category = j.value("category", "");
    t.description = j.value("description", "");
    t.spec_hash = SpecKey(text);  // the same key as the task parser's (base/hash.h)
    if (j.contains("tolerance")) {
      const auto& tol = j["tolerance"];
      t.rtol = tol.value("rtol", 0.0);
      t.atol = tol.value("atol", 0.0);
      t.bad_budget = tol.value("bad_budget", 0.0);
    }
    std::map<std::string, double> dims;
    if (j.contains("shapes") && j["shapes"].contains("seen") && !j["shapes"]["seen"].empty())
      for (auto& [k, v] : j["shapes"]["seen"][0].items()) dims[k] = v.get<double>();
    auto expr = [&](const char* key) -> Result<double> {
      if (!j.contains(key)) return 0.0;
      if (j[key].is_number()) return j[key].get<double>();
      return EvalDimExpression(j[key].get<std::string>(), dims);
    };
    HTAM_ASSIGN_OR_RETURN(t.flops, expr("flops"));
    HTAM_ASSIGN_OR_RETURN(t.bytes, expr("bytes"));
    return t;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(path + ": " + e.what());
  }
}

std::string ReadReferenceSource(const std::string& dir, const std::string& backend) {
  std::string text;
  if (!ReadWholeFile(dir + "/task.json", &text)) return "";
  try {
    auto j = nlohmann::json::parse(text);
    if (!j.contains("references") || !j["references"].contains(backend)) return "";
    std::string file = j["references"][backend].get<std::string>();
    if (file.find("..") != std::string::npos || (!file.empty() && file[0] == '/')) return "";
    return ReadFileOrEmpty(dir + "/" + file);
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace htam::server
