#include "base/status.h"

#include <gtest/gtest.h>

#include "base/log.h"

namespace htam {
namespace {

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  HTAM_ASSIGN_OR_RETURN(int h, Half(x));
  HTAM_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, ErrorsCarryCodeMessageAndContext) {
  Status st = Status::NotFound("session 42").WithContext("reopen");
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.IsNotFound());
  EXPECT_EQ(st.ToString(), "NotFound: reopen: session 42");
  EXPECT_EQ(Status::OK().ToString(), "OK");
}

TEST(StatusTest, ResultPropagatesTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "odd: 3");
}

TEST(LogTest, ParsesLevels) {
  LogLevel l;
  EXPECT_TRUE(ParseLogLevel("debug", &l));
  EXPECT_EQ(l, LogLevel::kDebug);
  EXPECT_TRUE(ParseLogLevel("error", &l));
  EXPECT_EQ(l, LogLevel::kError);
  EXPECT_FALSE(ParseLogLevel("loud", &l));
}

TEST(LogTest, WritesLinesAtOrAboveTheLevelToAFile) {
  std::string path = testing::TempDir() + "/htam_log_test.log";
  std::remove(path.c_str());
  ASSERT_TRUE(SetLogFile(path));
  SetLogLevel(LogLevel::kWarn);
  HTAM_LOG(kInfo, "test") << "hidden";
  HTAM_LOG(kWarn, "test") << "shown " << 7;
  SetLogFile("");
  SetLogLevel(LogLevel::kInfo);
  FILE* f = fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[512] = {0};
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  std::string text(buf, n);
  EXPECT_EQ(text.find("hidden"), std::string::npos);
  EXPECT_NE(text.find("WARN  [test] shown 7"), std::string::npos);
}

}  // namespace
}  // namespace htam
