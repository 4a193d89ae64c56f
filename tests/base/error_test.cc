#include "base/error.h"

#include <gtest/gtest.h>

namespace mf {
namespace {

TEST(ErrorTest, CheckThrowsWithKindAndStreamedMessage) {
  try {
    const int got = 3;
    MF_CHECK(got == 4, InvalidArgument, "expected 4, got ", got, "; pass 4");
    FAIL() << "MF_CHECK did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(e.what(), "expected 4, got 3; pass 4");
  }
}

TEST(ErrorTest, CheckPassesSilently) {
  EXPECT_NO_THROW(MF_CHECK(1 + 1 == 2, Internal, "math"));
}

TEST(ErrorTest, ContextLinesAppendToWhat) {
  Error error(ErrorKind::kNotFound, "no op 'foo'");
  error.add_context("in pass 'cse'").add_context("while compiling 'mlp'");
  EXPECT_EQ(std::string(error.what()), "no op 'foo'\n  in pass 'cse'\n  while compiling 'mlp'");
  EXPECT_EQ(error.message(), "no op 'foo'");
}

TEST(ErrorTest, InternalErrorsNameTheirSource) {
  try {
    MF_FAIL(Internal, "broken invariant");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("error_test.cc"), std::string::npos) << e.what();
  }
}

TEST(ErrorTest, KindNames) {
  EXPECT_EQ(error_kind_name(ErrorKind::kOutOfMemory), "OutOfMemory");
  EXPECT_EQ(error_kind_name(ErrorKind::kDataLoss), "DataLoss");
}

}  // namespace
}  // namespace mf

namespace mf {
namespace {

TEST(EchoTest, EscapesControlAndNonAsciiBytesSoAMessageStaysOneLine) {
  EXPECT_EQ(echo("a\nb\tc\rd\x1b[31m\x7f\xc3\xa9"), "a\\nb\\tc\\rd\\x1b[31m\\x7f\\xc3\\xa9");
  EXPECT_EQ(echo(std::string_view("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(echo("plain text, kept"), "plain text, kept");
}

TEST(EchoTest, CutsLongInputAndSaysHowMuchWasLeftOut) {
  const std::string huge(10 << 20, 'k');
  const std::string shown = echo(huge);
  EXPECT_EQ(shown, std::string(200, 'k') + "... (" + std::to_string((10 << 20) - 200) +
                       " more characters)");
  EXPECT_EQ(echo("abcdef", 3), "abc... (3 more characters)");
}

}  // namespace
}  // namespace mf
