// Unit tests of the htam CLI, run in process against stores written through the memory library.
#include "tools/cli/cli.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/cli/test_store.h"

namespace htam::cli {
namespace {
namespace fs = std::filesystem;

struct CliRun {
  int rc;
  std::string out, err;
};

CliRun Cli(std::vector<std::string> args) {
  std::ostringstream out, err;
  int rc = RunCli(args, out, err);
  return {rc, out.str(), err.str()};
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("htam-cli-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    data_ = (dir_ / "data").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string data_;
};

TEST_F(CliTest, StatusCountsRecords) {
  ASSERT_TRUE(testing::BuildTestStore(data_).ok());
  CliRun r = Cli({"--data-dir", data_, "status", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["records"]["transitions"], 30);
  EXPECT_EQ(j["records"]["directions"], 13);
  EXPECT_EQ(j["records"]["sessions"], 6);
  EXPECT_EQ(j["store"]["schema_version"], 2);
  EXPECT_EQ(j["store"]["daemon_running"], "no");
}

}  // namespace
}  // namespace htam::cli
