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

TEST(ErrorTest, CheckPassesSilently) { EXPECT_NO_THROW(MF_CHECK(1 + 1 == 2, Internal, "math")); }

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
