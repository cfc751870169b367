// Framing of the worker protocol: round trip, EOF, malformed lengths and bodies.
#include "daemon/eval/frame.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace htam::eval {
namespace {

TEST(Frame, RoundTripAndEof) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_TRUE(WriteFrame(sv[0], {{"type", "job"}, {"source", std::string(100000, 'x')}}).ok());
  auto f = ReadFrame(sv[1]);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)["type"], "job");
  EXPECT_EQ((*f)["source"].get<std::string>().size(), 100000u);
  close(sv[0]);
  EXPECT_TRUE(ReadFrame(sv[1]).status().IsNotFound());
  close(sv[1]);
}

TEST(Frame, WritingToADeadPeerIsAnErrorNotASignal) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  close(sv[1]);
  Status st = WriteFrame(sv[0], {{"type", "job"}});
  EXPECT_EQ(st.code(), Status::Code::kIOError);  // and the test process is still alive
  close(sv[0]);
}

TEST(Frame, MalformedInputIsRejected) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const unsigned char huge[4] = {0xff, 0xff, 0xff, 0xff};
  ASSERT_EQ(write(sv[0], huge, 4), 4);
  EXPECT_EQ(ReadFrame(sv[1]).status().code(), Status::Code::kCorruption);
  const char bad[] = "\0\0\0\5hello";
  ASSERT_EQ(write(sv[0], bad, 9), 9);
  EXPECT_EQ(ReadFrame(sv[1]).status().code(), Status::Code::kCorruption);
  const char notype[] = "\0\0\0\2{}";
  ASSERT_EQ(write(sv[0], notype, 6), 6);
  EXPECT_EQ(ReadFrame(sv[1]).status().code(), Status::Code::kCorruption);
  close(sv[0]);
  close(sv[1]);
}

TEST(FrameReader, ReassemblesSplitFrames) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  FrameReader r;
  const char part1[] = "\0\0\0\x0f{\"type\":";
  ASSERT_EQ(write(sv[0], part1, 12), 12);
  r.Feed(sv[1]);
  nlohmann::json out;
  Status err;
  EXPECT_FALSE(r.Next(&out, &err));
  EXPECT_TRUE(err.ok());
  ASSERT_EQ(write(sv[0], "\"ping\"}", 7), 7);
  r.Feed(sv[1]);
  ASSERT_TRUE(r.Next(&out, &err)) << err.ToString();
  EXPECT_EQ(out["type"], "ping");
  close(sv[0]);
  r.Feed(sv[1]);
  EXPECT_TRUE(r.eof());
  close(sv[1]);
}

}  // namespace
}  // namespace htam::eval
