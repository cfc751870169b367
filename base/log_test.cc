// Log lines as a person and a log shipper read them: text by default, one JSON object a line
// with the ids of the LogScope in force when general.log_format = json.
#include "base/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace htam {
namespace {

class LogFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/log_test_" + std::to_string(::getpid()) + ".log";
    std::remove(path_.c_str());
    ASSERT_TRUE(SetLogFile(path_));
  }
  void TearDown() override {
    SetLogFile("");
    SetLogFormat(LogFormat::kText);
    std::remove(path_.c_str());
  }
  std::string Read() {
    std::ifstream f(path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::string path_;
};

TEST_F(LogFileTest, TextIsTheDefault) {
  HTAM_LOG(kInfo, "server") << "listening on " << 7878;
  const std::string t = Read();
  EXPECT_NE(t.find("INFO  [server] listening on 7878\n"), std::string::npos) << t;
  EXPECT_EQ(t.find('{'), std::string::npos) << t;
}

TEST_F(LogFileTest, JsonLinesCarryScopeIds) {
  LogFormat f;
  ASSERT_TRUE(ParseLogFormat("json", &f));
  EXPECT_FALSE(ParseLogFormat("xml", &f));
  SetLogFormat(LogFormat::kJson);
  {
    LogScope r("request_id", 7), s("session_id", 42), j("job_id", 0);
    HTAM_LOG(kWarn, "server") << "a \"quoted\"\nline\twith\x01 control";
    std::thread([fields = LogScope::Current()] {
      LogScope again(fields);
      HTAM_LOG(kInfo, "reader") << "from another thread";
    }).join();
  }
  HTAM_LOG(kError, "eval") << "no scope";
  std::istringstream in(Read());
  std::string l1, l2, l3;
  std::getline(in, l1);
  std::getline(in, l2);
  std::getline(in, l3);
  EXPECT_EQ(l1.rfind("{\"ts\":\"", 0), 0u) << l1;
  EXPECT_NE(l1.find("\"level\":\"warn\",\"component\":\"server\","
                    "\"msg\":\"a \\\"quoted\\\"\\nline\\twith\\u0001 control\""),
            std::string::npos)
      << l1;
  EXPECT_NE(l1.find("\"session_id\":42"), std::string::npos) << l1;
  EXPECT_NE(l1.find("\"request_id\":7"), std::string::npos) << l1;
  EXPECT_EQ(l1.find("job_id"), std::string::npos) << "zero ids are left out: " << l1;
  EXPECT_EQ(l1.back(), '}');
  EXPECT_NE(l2.find("\"component\":\"reader\""), std::string::npos) << l2;
  EXPECT_NE(l2.find("\"session_id\":42"), std::string::npos) << l2;
  EXPECT_EQ(l3.find("_id"), std::string::npos) << "scope ended: " << l3;
}

}  // namespace
}  // namespace htam
