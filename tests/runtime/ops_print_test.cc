// The print op and its sink: what the default text looks like, that a custom sink receives every
// input with the prefix, and that print passes its first input through.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/kernels/print_sink.h"
#include "tests/runtime/ops_test_util.h"

namespace mf::runtime::ops {
namespace {

using ::testing::ElementsAre;
using testing::f32;
using ::testing::HasSubstr;
using testing::HostTensor;
using testing::run_op;

TEST(OpPrint, FormatsLikeNumpy) {
  HostTensor x = f32({2, 2}, {1, 2, 3, 4.5});
  EXPECT_EQ(format_tensor(x.view()),
            "Tensor(shape=[2, 2], dtype=Float32, value=\n[[1, 2],\n [3, 4.5]])");
  HostTensor s = HostTensor::from_doubles({ir::DType::kBool, {}}, {1});
  EXPECT_EQ(format_tensor(s.view()), "Tensor(shape=[], dtype=Bool, value=True)");
  HostTensor big = f32({2000}, std::vector<double>(2000, 7));
  EXPECT_EQ(format_tensor(big.view()),
            "Tensor(shape=[2000], dtype=Float32, value=\n[7, 7, 7, ..., 7, 7, 7])");
}

TEST(OpPrint, SinkReceivesEveryInputAndOutputPassesThrough) {
  std::vector<std::string> lines;
  ScopedPrintSink sink([&](std::string_view text, const ir::TensorView& t) {
    lines.push_back(std::string(text) + "|" + format_tensor(t));
  });
  const std::vector<HostTensor> out =
      run_op("print", {f32({2}, {1, 2}), f32({}, {3})}, {{"prefix", std::string("loss")}});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("loss|Tensor(shape=[2]"));
  EXPECT_THAT(lines[1], HasSubstr("loss|Tensor(shape=[], dtype=Float32, value=3)"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].to_doubles(), ElementsAre(1, 2));
}

TEST(OpPrint, DefaultSinkWritesToStdout) {
  ::testing::internal::CaptureStdout();
  run_op("print", {f32({1}, {42})});
  EXPECT_EQ(::testing::internal::GetCapturedStdout(),
            "Tensor(shape=[1], dtype=Float32, value=\n[42])\n");
}

}  // namespace
}  // namespace mf::runtime::ops
