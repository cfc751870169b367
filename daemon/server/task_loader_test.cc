// Task folders become Task records; FLOPs/bytes expressions are evaluated at the first seen shape.
#include "daemon/server/task_loader.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace htam::server {
namespace {

TEST(TaskLoaderTest, ExpressionsOverDimensions) {
  std::map<std::string, double> dims{{"N", 10}, {"M", 4}};
  EXPECT_DOUBLE_EQ(*EvalDimExpression("8*N", dims), 80);
  EXPECT_DOUBLE_EQ(*EvalDimExpression("2*N*M + (N - M)/2", dims), 83);
  EXPECT_FALSE(EvalDimExpression("2*K", dims).ok());
  EXPECT_FALSE(EvalDimExpression("(N", dims).ok());
  EXPECT_FALSE(EvalDimExpression("N $ 2", dims).ok());
  EXPECT_FALSE(EvalDimExpression(std::string(10000, '('), dims).ok());
}

TEST(TaskLoaderTest, NamesCannotEscapeTheSuite) {
  EXPECT_TRUE(IsTaskName("cpu_relu"));
  EXPECT_FALSE(IsTaskName("../etc"));
  EXPECT_FALSE(IsTaskName("a/b"));
  EXPECT_FALSE(IsTaskName(".hidden"));
  EXPECT_FALSE(IsTaskName(""));
}

TEST(TaskLoaderTest, LoadsATaskFolder) {
  char tmpl[] = "/tmp/htam-task-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  {
    std::ofstream f(dir + "/task.json");
    f << R"J({"name": "relu", "category": "elementwise", "description": "y = max(x, 0)",
             "dims": ["N"], "shapes": {"seen": [{"N": 1024}], "held_out": [{"N": 999}]},
             "tolerance": {"rtol": 1e-5, "atol": 1e-6, "bad_budget": 0.0},
             "flops": "N", "bytes": "8*N", "references": {"cpu": "reference.cpp"}})J";
    std::ofstream r(dir + "/reference.cpp");
    r << "// reference\n";
  }
  auto t = LoadTaskDir(dir);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->name, "relu");
  EXPECT_DOUBLE_EQ(t->flops, 1024);
  EXPECT_DOUBLE_EQ(t->bytes, 8192);
  EXPECT_DOUBLE_EQ(t->rtol, 1e-5);
  EXPECT_FALSE(t->spec_hash.empty());
  EXPECT_EQ(ReadReferenceSource(dir, "cpu"), "// reference\n");
  EXPECT_EQ(ReadReferenceSource(dir, "cuda"), "");
  EXPECT_TRUE(LoadTaskDir(dir + "/nope").status().IsNotFound());
  {
    std::ofstream f(dir + "/task.json");
    f << "{ not json";
  }
  EXPECT_EQ(LoadTaskDir(dir).status().code(), Status::Code::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace htam::server
