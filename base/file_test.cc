// Whole-file writes that replace a file at once: content, mode, no temporary left behind, and a
// clear error where the folder is missing. Folders published whole (PublishDir).
#include "base/file.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace htam {
namespace {

class WriteFileAtomicTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/file_test_" + std::to_string(getpid());
    ASSERT_TRUE(MakeDirs(dir_, 0755).ok());
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    if (DIR* d = opendir(dir_.c_str())) {
      while (dirent* e = readdir(d))
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
          names.push_back(e->d_name);
      closedir(d);
    }
    return names;
  }
  std::string dir_;
};

TEST_F(WriteFileAtomicTest, ReplacesTheFileAndLeavesNoTemporary) {
  const std::string path = dir_ + "/task.json";
  ASSERT_TRUE(WriteFileAtomic(path, "old").ok());
  const std::string binary("a\0b\n", 4);
  Status s = WriteFileAtomic(path, binary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ReadFileOrEmpty(path), binary);
  EXPECT_EQ(Names(), std::vector<std::string>{"task.json"});
}

TEST_F(WriteFileAtomicTest, GivesTheModeAskedFor) {
  const std::string shared = dir_ + "/shared", secret = dir_ + "/secret";
  ASSERT_TRUE(WriteFileAtomic(shared, "x").ok());
  ASSERT_TRUE(WriteFileAtomic(secret, "y", 0600).ok());
  struct stat st;
  ASSERT_EQ(stat(shared.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_EQ(stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(WriteFileAtomicTest, AMissingFolderIsAnIOErrorThatNamesIt) {
  Status s = WriteFileAtomic(dir_ + "/no/such/file", "x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_NE(s.message().find(dir_ + "/no/such/file"), std::string::npos) << s.message();
  EXPECT_TRUE(Names().empty());
}

TEST_F(WriteFileAtomicTest, SyncPathTakesFilesAndFolders) {
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/f", "x").ok());
  EXPECT_TRUE(SyncPath(dir_ + "/f").ok());
  EXPECT_TRUE(SyncPath(dir_).ok());
  Status s = SyncPath(dir_ + "/missing");
  EXPECT_EQ(s.code(), Status::Code::kIOError);
}

TEST_F(WriteFileAtomicTest, PublishDirShowsTheWholeFolderOrNothing) {
  const std::string dir = dir_ + "/task-1";
  ASSERT_TRUE(PublishDir(dir, [](const std::string& staging) {
                return WriteFileAtomic(staging + "/task.json", "{}");
              }).ok());
  std::string text;
  EXPECT_TRUE(ReadWholeFile(dir + "/task.json", &text));
  EXPECT_EQ(text, "{}");
  EXPECT_EQ(Names(), std::vector<std::string>{"task-1"});  // no staging folder left

  // A fill that fails: its error, and neither the folder nor its staging folder.
  Status s = PublishDir(dir_ + "/task-2", [](const std::string& staging) {
    EXPECT_TRUE(WriteFileAtomic(staging + "/part", "x").ok());
    return Status::IOError("disk full");
  });
  EXPECT_EQ(s.message(), "disk full");
  EXPECT_EQ(Names(), std::vector<std::string>{"task-1"});

  // Published first by someone else: this one succeeds and leaves theirs as it is.
  ASSERT_TRUE(PublishDir(dir, [](const std::string& staging) {
                return WriteFileAtomic(staging + "/task.json", "other");
              }).ok());
  EXPECT_TRUE(ReadWholeFile(dir + "/task.json", &text));
  EXPECT_EQ(text, "{}");
  EXPECT_EQ(Names(), std::vector<std::string>{"task-1"});
}

TEST_F(WriteFileAtomicTest, PublishFileShowsTheWholeFileOrNothing) {
  const std::string path = dir_ + "/cpu-abc.so";
  for (bool durable : {false, true}) {
    ASSERT_TRUE(PublishFile(
                    path,
                    [&](const std::string& tmp) {
                      EXPECT_NE(tmp, path);  // written beside, never in place
                      return WriteFileAtomic(tmp, durable ? "durable" : "cache", 0600);
                    },
                    durable)
                    .ok());
    std::string text;
    EXPECT_TRUE(ReadWholeFile(path, &text));
    EXPECT_EQ(text, durable ? "durable" : "cache");
    EXPECT_EQ(Names(), std::vector<std::string>{"cpu-abc.so"});
  }
  // A fill that fails: its error, the old file as it was, no temporary left.
  Status s = PublishFile(path, [](const std::string& tmp) {
    EXPECT_TRUE(WriteFileAtomic(tmp, "half").ok());
    return Status::Internal("compiler died");
  });
  EXPECT_EQ(s.message(), "compiler died");
  std::string text;
  EXPECT_TRUE(ReadWholeFile(path, &text));
  EXPECT_EQ(text, "durable");
  EXPECT_EQ(Names(), std::vector<std::string>{"cpu-abc.so"});
  // The temporary starts with the mode asked for.
  const std::string export_path = dir_ + "/export.jsonl";
  ASSERT_TRUE(PublishFile(
                  export_path,
                  [](const std::string& tmp) {
                    struct stat st;
                    EXPECT_EQ(stat(tmp.c_str(), &st), 0);
                    EXPECT_EQ(st.st_mode & 0777, 0640u);
                    return Status::OK();
                  },
                  false, 0640)
                  .ok());
  // A missing folder: an IOError that names it.
  s = PublishFile(dir_ + "/no/such/file", [](const std::string&) { return Status::OK(); });
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_NE(s.message().find(dir_ + "/no/such/file"), std::string::npos) << s.message();
}

TEST_F(WriteFileAtomicTest, MovePathMovesIntoAnEmptyFolderButNeverOverOne) {
  ASSERT_TRUE(MakeDirs(dir_ + "/staged/entry", 0755).ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/staged/entry/meta", "m").ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/empty", 0755).ok());
  ASSERT_TRUE(MovePath(dir_ + "/staged/entry", dir_ + "/empty").ok());
  std::string text;
  EXPECT_TRUE(ReadWholeFile(dir_ + "/empty/meta", &text));
  ASSERT_TRUE(MakeDirs(dir_ + "/staged/other", 0755).ok());
  Status s = MovePath(dir_ + "/staged/other", dir_ + "/empty");  // not empty now
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_NE(s.message().find(dir_ + "/staged/other"), std::string::npos) << s.message();
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/staged/other"));
}

// A folder several users share (eval.device_lock_dir): made sticky and world-writable with its
// parents; one that exists keeps its mode (another user's, or the administrator's choice).
TEST_F(WriteFileAtomicTest, MakeSharedDirMakesANewFolderStickyAndLeavesAnOldOneAlone) {
  const std::string shared = dir_ + "/a/b/locks";
  ASSERT_TRUE(MakeSharedDir(shared).ok());
  struct stat st;
  ASSERT_EQ(stat(shared.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u);
  const std::string old = dir_ + "/old";
  ASSERT_EQ(mkdir(old.c_str(), 0700), 0);
  ASSERT_TRUE(MakeSharedDir(old).ok());
  ASSERT_EQ(stat(old.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_FALSE(MakeSharedDir(dir_ + "/" + std::string(300, 'x') + "/locks").ok());
}

}  // namespace
}  // namespace htam
