// Framing of the worker protocol: round trip, EOF, malformed lengths and bodies, job and result
// buffer frames.
#include "daemon/eval/frame.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/eval/evaluator.h"
#include "daemon/eval/job_codec.h"

namespace htam::eval {
namespace {

TEST(Frame, RoundTripAndEof) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_TRUE(WriteFrame(sv[0], {{"type", "progress"}, {"stage", std::string(100000, 'x')}}).ok());
  auto f = ReadFrame(sv[1]);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)["type"], "progress");
  EXPECT_EQ((*f)["stage"].get<std::string>().size(), 100000u);
  close(sv[0]);
  EXPECT_TRUE(ReadFrame(sv[1]).status().IsNotFound());
  close(sv[1]);
}

TEST(Frame, WritingToADeadPeerIsAnErrorNotASignal) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  close(sv[1]);
  Status st = WriteFrame(sv[0], {{"type", "progress"}});
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

TEST(Frame, AJobAndAResultTravelAsBufferFrames) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  EvalJob job;
  job.job_id = 12;
  job.backend = "cpu";
  job.source = std::string(100000, 'x');
  fb::JobSpecT spec = job;
  spec.gate = std::make_unique<fb::GateSpecT>();
  spec.gate->seeds = 4;
  ASSERT_TRUE(WriteBufferFrame(sv[0], PackJob(spec)).ok());
  EvalResult res;
  res.job_id = 12;
  res.status = fb::OutcomeStatus::Ok;
  ASSERT_TRUE(WriteBufferFrame(sv[0], PackResult(res)).ok());
  auto f = ReadFrame(sv[1]);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)["type"], "job");
  auto back = UnpackJob(FrameBuffer(*f), "job frame");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->source.size(), 100000u);
  EXPECT_EQ(back->gate->seeds, 4);
  f = ReadFrame(sv[1]);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)["type"], "result");
  auto r = UnpackResult(FrameBuffer(*f), "result frame");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, fb::OutcomeStatus::Ok);
  close(sv[0]);
  close(sv[1]);
}

TEST(Frame, ABufferFrameOfAnotherKindOrBrokenIsRejected) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  // A buffer with an identifier that is neither a job nor a result: refused by the reader.
  ASSERT_TRUE(WriteBufferFrame(sv[0], std::string("\x08\0\0\0HTAM\0\0\0\0", 12)).ok());
  auto f = ReadFrame(sv[1]);
  EXPECT_EQ(f.status().code(), Status::Code::kCorruption);
  EXPECT_NE(f.status().message().find("HTAM"), std::string::npos) << f.status().message();
  // Too short to name its kind.
  ASSERT_TRUE(WriteBufferFrame(sv[0], "abc").ok());
  EXPECT_EQ(ReadFrame(sv[1]).status().code(), Status::Code::kCorruption);
  // A job's identifier on a body that is not a job: framed, then refused where it is unpacked.
  ASSERT_TRUE(WriteBufferFrame(sv[0], std::string("\xff\xff\0\0HTJBgarbage", 15)).ok());
  f = ReadFrame(sv[1]);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto job = UnpackJob(FrameBuffer(*f), "job frame");
  EXPECT_EQ(job.status().code(), Status::Code::kCorruption);
  EXPECT_NE(job.status().message().find("verifier"), std::string::npos) << job.status().message();
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
