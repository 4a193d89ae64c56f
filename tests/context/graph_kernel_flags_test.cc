#include "context/graph_kernel_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/context/context_fixture.h"

namespace mf::context {
namespace {

TEST(ContextGraphKernelFlagsTest, EmptyMeansNothingGiven) {
  EXPECT_EQ(parse_graph_kernel_flags(""), GraphKernelFlags{});
  EXPECT_EQ(parse_graph_kernel_flags("   "), GraphKernelFlags{});
}

TEST(ContextGraphKernelFlagsTest, ParsesEveryFlag) {
  const GraphKernelFlags flags = parse_graph_kernel_flags(
      "--opt_level=3 --dump_as_text --enable_expand_ops=gelu,softmax --enable_expand_ops_only=gelu "
      "--disable_expand_ops=layer_norm --enable_cluster_ops=matmul "
      "--enable_cluster_ops_only=add,mul "
      "--disable_cluster_ops=reduce_sum --enable_pass=cse --disable_pass=stitch,recompute "
      "--enable_stitch_fusion --enable_recompute_fusion=true --enable_parallel_fusion=false "
      "--reduce_fuse_depth=4 --composite_op_limit_size=200");
  EXPECT_EQ(flags.opt_level, 3);
  EXPECT_TRUE(flags.dump_as_text);
  EXPECT_EQ(flags.enable_expand_ops, (std::vector<std::string>{"gelu", "softmax"}));
  EXPECT_EQ(flags.enable_expand_ops_only, (std::vector<std::string>{"gelu"}));
  EXPECT_EQ(flags.disable_expand_ops, (std::vector<std::string>{"layer_norm"}));
  EXPECT_EQ(flags.enable_cluster_ops, (std::vector<std::string>{"matmul"}));
  EXPECT_EQ(flags.enable_cluster_ops_only, (std::vector<std::string>{"add", "mul"}));
  EXPECT_EQ(flags.disable_cluster_ops, (std::vector<std::string>{"reduce_sum"}));
  EXPECT_EQ(flags.enable_pass, (std::vector<std::string>{"cse"}));
  EXPECT_EQ(flags.disable_pass, (std::vector<std::string>{"stitch", "recompute"}));
  EXPECT_TRUE(flags.enable_stitch_fusion);
  EXPECT_TRUE(flags.enable_recompute_fusion);
  EXPECT_FALSE(flags.enable_parallel_fusion);
  EXPECT_EQ(flags.reduce_fuse_depth, 4);
  EXPECT_EQ(flags.composite_op_limit_size, 200);
}

TEST(ContextGraphKernelFlagsTest, CanonicalTextRoundTrips) {
  const GraphKernelFlags flags =
      parse_graph_kernel_flags("--dump_as_text   --enable_pass=a,b --opt_level=1");
  EXPECT_EQ(to_string(flags), "--opt_level=1 --dump_as_text --enable_pass=a,b");
  EXPECT_EQ(parse_graph_kernel_flags(to_string(flags)), flags);
}

TEST(ContextGraphKernelFlagsTest, UnknownFlagsAreIgnoredWithTheNearestKnownOne) {
  const GraphKernelFlags flags = parse_graph_kernel_flags("--opt_levle=2 --dump_as_text");
  EXPECT_FALSE(flags.opt_level.has_value());
  EXPECT_TRUE(flags.dump_as_text);
  EXPECT_EQ(flags.unknown, (std::vector<std::string>{"--opt_levle=2"}));
  EXPECT_EQ(to_string(flags), "--dump_as_text");
  const auto warnings = unknown_flag_warnings(flags);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].substr(0, warnings[0].find(" (known flags")),
            "graph_kernel_flags: unknown flag '--opt_levle=2' is ignored; did you mean "
            "'--opt_level'?");
  EXPECT_THAT(unknown_flag_warnings(parse_graph_kernel_flags("--enable_stich_fusion"))[0],
              ::testing::HasSubstr("did you mean '--enable_stitch_fusion'?"));
}

TEST(ContextGraphKernelFlagsTest, ErrorsNameTheFlag) {
  const auto message = [](std::string_view text) {
    return error_message([&] { parse_graph_kernel_flags(text); });
  };
  EXPECT_EQ(message("--opt_level=-1"),
            "graph_kernel_flags: '--opt_level=-1' needs an integer in [0, 3], for example "
            "--opt_level=2");
  EXPECT_EQ(
      message("--opt_level"),
      "graph_kernel_flags: '--opt_level' needs an integer in [0, 3], for example --opt_level=2");
  EXPECT_EQ(message("--opt_level=two"),
            "graph_kernel_flags: '--opt_level=two' needs an integer in [0, 3], for example "
            "--opt_level=2");
  EXPECT_EQ(message("--dump_as_text=yes"),
            "graph_kernel_flags: '--dump_as_text=yes' takes no value, or =true / =false (1 / 0, "
            "on / off)");
  EXPECT_EQ(message("--enable_expand_ops"),
            "graph_kernel_flags: '--enable_expand_ops' needs a comma-separated list of names, for "
            "example --enable_expand_ops=gelu,softmax");
  EXPECT_EQ(message("--enable_expand_ops="),
            "graph_kernel_flags: '--enable_expand_ops=' needs a comma-separated list of names, for "
            "example --enable_expand_ops=gelu,softmax");
  EXPECT_EQ(message("--disable_pass=a,,b"),
            "graph_kernel_flags: '--disable_pass=' has an empty name in its list; separate names "
            "with single commas");
  EXPECT_EQ(message("--reduce_fuse_depth=0"),
            "graph_kernel_flags: '--reduce_fuse_depth=0' needs an integer >= 1, for example "
            "--reduce_fuse_depth=2");
}

// Where MindSpore warns and goes on, so does the parser, and says what it did.
TEST(ContextGraphKernelFlagsTest, WhatMindSporeToleratesIsAdjustedWithAWarning) {
  std::vector<std::string> notes;
  GraphKernelFlags flags = parse_graph_kernel_flags("--opt_level=4", &notes);
  EXPECT_EQ(flags.opt_level, 3);
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "graph_kernel_flags: '--opt_level=4' is above 3; using --opt_level=3"}));
  notes.clear();
  flags = parse_graph_kernel_flags("--dump_as_text=1 --enable_stitch_fusion=On", &notes);
  EXPECT_TRUE(flags.dump_as_text);
  EXPECT_TRUE(flags.enable_stitch_fusion);
  EXPECT_TRUE(notes.empty());
  EXPECT_FALSE(parse_graph_kernel_flags("--dump_as_text=0").dump_as_text);
  flags = parse_graph_kernel_flags("--opt_level=1 opt_level=2 -- --opt_level=2", &notes);
  EXPECT_EQ(flags.opt_level, 2);
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "graph_kernel_flags: 'opt_level=2' is not a flag (flags look like "
                       "--opt_level=2); ignored",
                       "graph_kernel_flags: '--' is not a flag (flags look like --opt_level=2); "
                       "ignored",
                       "graph_kernel_flags: '--opt_level' is given more than once; the last "
                       "value, '--opt_level=2', wins"}));
}

}  // namespace
}  // namespace mf::context
