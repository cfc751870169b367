#include "base/text.h"

#include <gtest/gtest.h>

namespace htam {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii, tiled GEMM"));
  EXPECT_TRUE(IsValidUtf8("gr\xC3\xBC\xC3\x9F 1\xE2\x80\xAF\xC2\xB5s \xF0\x9F\x9A\x80"));
}

TEST(Utf8, RejectsMalformedTextAndSaysWhere) {
  size_t at = 99;
  EXPECT_FALSE(IsValidUtf8("ok \xFF", &at));
  EXPECT_EQ(at, 3u);
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("cut \xE2\x82", &at));  // truncated at the end
  EXPECT_EQ(at, 4u);
  EXPECT_FALSE(IsValidUtf8("\x80"));  // a lone continuation byte
}

TEST(EscapeForLine, NewlinesAndBadBytesCannotForgeLines) {
  EXPECT_EQ(EscapeForLine("agent\ncurve: on"), "agent\\ncurve: on");
  EXPECT_EQ(EscapeForLine("a\\b\t\x01\xFF"), "a\\\\b\\t\\x01\\xff");
  EXPECT_EQ(EscapeForLine("\xC3\xBC ok"), "\xC3\xBC ok");
  EXPECT_TRUE(IsValidUtf8(EscapeForLine("x\xC3\x28\xA0\xA1")));
}

}  // namespace
}  // namespace htam
