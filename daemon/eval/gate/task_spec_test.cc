// task.json parsing: valid specs, and errors that name the file and the field.
#include "daemon/eval/gate/task_spec.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

namespace htam {
namespace {

const char* kGood = R"JSON({
  "name": "relu", "category": "elementwise", "description": "y = max(x, 0)",
  "dims": ["N"],
  "inputs":  [{"name": "x", "dtype": "f32", "shape": ["N"],
               "init": {"dist": "normal", "mean": 0.0, "std": 1.0,
                        "special": [0.0, -0.0, 65504.0], "special_fraction": 0.001}}],
  "outputs": [{"name": "y", "dtype": "f32", "shape": ["N"]}],
  "shapes": {"seen": [{"N": 1048576}], "held_out": [{"N": 999983}]},
  "tolerance": {"rtol": 1e-5, "atol": 1e-6, "bad_budget": 0.0},
  "flops": "N", "bytes": "8*N",
  "references": {"cpu": "reference.cpp"},
  "lineage": "lineage.json"
})JSON";

Result<TaskSpec> Parse(std::string text) {
  return ParseTaskJson(text, "/t", "t/task.json");
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  auto p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  return s.replace(p, from.size(), to);
}

TEST(TaskSpec, ParsesTheBriefExample) {
  auto t = Parse(kGood);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->name, "relu");
  ASSERT_EQ(t->inputs.size(), 1u);
  EXPECT_EQ(t->inputs[0].dtype, HTAM_F32);
  EXPECT_EQ(t->inputs[0].init.special.size(), 3u);
  EXPECT_EQ(t->held_out_shapes[0].at("N"), 999983);
  EXPECT_DOUBLE_EQ(*t->bytes.Eval(t->seen_shapes[0]), 8.0 * 1048576);
  EXPECT_EQ(*t->ReferencePath("cpu"), "/t/reference.cpp");
  EXPECT_FALSE(t->ReferencePath("cuda").ok());
  EXPECT_EQ(t->spec_hash.size(), 64u);
}

// KernelBench tasks: a problem file instead of references, one fixed shape set.
const char* kKernelBench = R"JSON({
  "name": "kb_relu", "dims": [],
  "inputs":  [{"name": "x", "dtype": "f32", "shape": [4096]},
              {"name": "linear.weight", "dtype": "f32", "shape": [8, 4096]}],
  "outputs": [{"name": "out", "dtype": "f32", "shape": [8]}],
  "shapes": {"seen": [{}]},
  "flops": "0", "bytes": "4096",
  "kernelbench": "problem.py"
})JSON";

TEST(TaskSpec, KernelBenchTaskNeedsNoReferenceButOneFixedShapeSet) {
  auto t = Parse(kKernelBench);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->kernelbench, "problem.py");
  EXPECT_TRUE(t->references.empty());
  EXPECT_EQ(t->Shape(t->inputs[1], t->seen_shapes[0]), (std::vector<int64_t>{8, 4096}));
  EXPECT_FALSE(t->ReferencePath("cpu").ok());
  auto held = Parse(Replace(kKernelBench, R"("seen": [{}])", R"("seen": [{}], "held_out": [{}])"));
  ASSERT_FALSE(held.ok());
  EXPECT_NE(held.status().message().find("no held-out shapes"), std::string::npos);
  auto escape = Parse(Replace(kKernelBench, R"("problem.py")", R"("../problem.py")"));
  ASSERT_FALSE(escape.ok());
  EXPECT_NE(escape.status().message().find("kernelbench: must be a relative path"),
            std::string::npos)
      << escape.status().message();
  // An ordinary task still needs its references.
  auto plain = Parse(Replace(kKernelBench, R"("kernelbench": "problem.py")", R"("lineage": "")"));
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("references"), std::string::npos);
}

TEST(TaskSpec, KernelBenchProblemFileMustExist) {
  char tmpl[] = "/tmp/htam-kbspec-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  FILE* f = fopen((dir + "/task.json").c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs(kKernelBench, f);
  fclose(f);
  auto t = ParseTaskFile(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("kernelbench: missing problem file 'problem.py'"),
            std::string::npos)
      << t.status().message();
  f = fopen((dir + "/problem.py").c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  EXPECT_TRUE(ParseTaskFile(dir).ok());
  unlink((dir + "/problem.py").c_str());
  unlink((dir + "/task.json").c_str());
  rmdir(dir.c_str());
  auto shipped = ParseTaskFile("configs/tasks/kb_linear_relu");
  ASSERT_TRUE(shipped.ok()) << shipped.status().ToString();
  EXPECT_EQ(shipped->inputs[1].name, "linear.weight");
}

TEST(TaskSpec, UnknownDtypeNamesFileAndField) {
  auto t = Parse(
      Replace(kGood, R"("dtype": "f32", "shape": ["N"],)", R"("dtype": "f33", "shape": ["N"],)"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("t/task.json: inputs[0].dtype: unknown dtype 'f33'"),
            std::string::npos)
      << t.status().message();
}

TEST(TaskSpec, ShapeMismatchIsReported) {
  auto t = Parse(Replace(kGood, R"("outputs": [{"name": "y", "dtype": "f32", "shape": ["N"]}])",
                         R"("outputs": [{"name": "y", "dtype": "f32", "shape": ["N - 999983"]}])"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("shapes.held_out[0]: shape mismatch: tensor 'y'"),
            std::string::npos)
      << t.status().message();
}

TEST(TaskSpec, UnboundDimIsReported) {
  auto t = Parse(Replace(kGood, R"("held_out": [{"N": 999983}])", R"("held_out": [{}])"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("shapes.held_out[0]: dim 'N' is not bound"),
            std::string::npos)
      << t.status().message();
}

TEST(TaskSpec, MissingReferenceIsReported) {
  auto t = Parse(Replace(kGood, R"("references": {"cpu": "reference.cpp"},)", ""));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("references: missing reference"), std::string::npos);
  auto f = ParseTaskFile("/nonexistent-task-dir");
  EXPECT_TRUE(f.status().IsNotFound());
}

TEST(TaskSpec, ReferenceFileMustExist) {
  // configs/tasks/cpu_relu exists in the repository; a copy of its spec in a temp dir does not
  // carry the reference file.
  char dir[] = "/tmp/htam-task-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/task.json";
  FILE* f = fopen(path.c_str(), "w");
  fputs(kGood, f);
  fclose(f);
  auto t = ParseTaskFile(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("references.cpu: missing reference file 'reference.cpp'"),
            std::string::npos)
      << t.status().message();
  remove(path.c_str());
  rmdir(dir);
}

TEST(TaskSpec, BadExpressionIsReported) {
  for (const char* bad : {"8*", "8*M", "(N", "N $ 2"}) {
    auto t = Parse(Replace(kGood, R"("bytes": "8*N")", std::string(R"("bytes": ")") + bad + "\""));
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_NE(t.status().message().find("t/task.json: bytes: bad expression"), std::string::npos)
        << t.status().message();
  }
}

TEST(TaskSpec, UnknownDistributionAndBadToleranceAreReported) {
  auto t = Parse(Replace(kGood, R"("dist": "normal")", R"("dist": "cauchy")"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("inputs[0].init.dist: unknown distribution 'cauchy'"),
            std::string::npos);
  t = Parse(Replace(kGood, R"("rtol": 1e-5)", R"("rtol": -1)"));
  ASSERT_FALSE(t.ok());
  t = Parse("{not json");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("not valid JSON"), std::string::npos);
}

TEST(TaskSpec, CaseSizeLimit) {
  auto t = ParseTaskJson(kGood, "/t", "t/task.json", 1024);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("over the limit"), std::string::npos);
  EXPECT_NE(t.status().message().find("(eval.max_case_mb): this task cannot be evaluated here"),
            std::string::npos);
}

TEST(Expr, EvaluatesArithmetic) {
  std::vector<std::string> names{"M", "N", "K"};
  auto e = Expr::Parse("2*M*N*K + (M - 1) / 2", &names);
  ASSERT_TRUE(e.ok());
  EXPECT_DOUBLE_EQ(*e->Eval({{"M", 3}, {"N", 4}, {"K", 5}}), 121.0);
  EXPECT_FALSE(e->Eval({{"M", 3}}).ok());
  auto z = Expr::Parse("N / (M - M)", &names);
  ASSERT_TRUE(z.ok());
  EXPECT_FALSE(z->Eval({{"M", 3}, {"N", 1}}).ok());
}

TEST(Dtype, RoundTrips) {
  for (const char* n : {"f32", "f16", "bf16", "f64", "i32", "i64", "u8", "i8", "bool"}) {
    htam_dtype d;
    ASSERT_TRUE(ParseDtype(n, &d));
    EXPECT_STREQ(DtypeName(d), n);
  }
  htam_dtype d;
  EXPECT_FALSE(ParseDtype("float", &d));
}

}  // namespace
}  // namespace htam

namespace htam {
namespace {

// Every task shipped in configs/tasks (all backends) parses under the shared contract.
TEST(TaskSpec, EveryShippedTaskParses) {
  DIR* d = opendir("configs/tasks");
  ASSERT_NE(d, nullptr) << "run from the repository root";
  int n = 0;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    struct stat st;
    if (name[0] == '.' || stat(("configs/tasks/" + name + "/task.json").c_str(), &st) != 0)
      continue;
    auto t = ParseTaskFile("configs/tasks/" + name);
    EXPECT_TRUE(t.ok()) << name << ": " << t.status().ToString();
    ++n;
  }
  closedir(d);
  EXPECT_GE(n, 3);
}

}  // namespace
}  // namespace htam
