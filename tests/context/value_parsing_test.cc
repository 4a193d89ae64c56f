#include "context/value_parsing.h"

#include <gtest/gtest.h>

#include "context/context.h"
#include "context/policy.h"
#include "tests/context/context_fixture.h"

namespace mf::context {
namespace {

using ::testing::HasSubstr;

std::string set_error(const Json& change, ErrorKind kind = ErrorKind::kInvalidArgument) {
  return error_message([&] { set(change); }, kind);
}

TEST_F(ContextTest, WrongTypesNameKeyValueAndWhatIsAllowed) {
  EXPECT_EQ(
      set_error({{"pynative_synchronize", "yes"}}),
      "For 'context.set_context', the value of 'pynative_synchronize' must be a bool (true or "
      "false), but got 'yes'.");
  EXPECT_EQ(set_error({{"max_call_depth", 0}}),
            "For 'context.set_context', the value of 'max_call_depth' must be an integer >= 1, "
            "but got 0.");
  EXPECT_EQ(set_error({{"max_call_depth", "10"}}),
            "For 'context.set_context', the value of 'max_call_depth' must be an integer >= 1, "
            "but got '10'.");
  EXPECT_EQ(set_error({{"device_id", 4096}}),
            "For 'context.set_context', the value of 'device_id' must be an integer in [0, 4095], "
            "but got 4096.");
  EXPECT_EQ(
      set_error({{"runtime_num_threads", -1}}),
      "For 'context.set_context', the value of 'runtime_num_threads' must be an integer >= 0, "
      "but got -1.");
  EXPECT_EQ(
      set_error({{"save_graphs_path", 3}}),
      "For 'context.set_context', the value of 'save_graphs_path' must be a string, but got 3.");
  EXPECT_EQ(
      set_error({{"enable_compile_cache", 1}}),
      "For 'context.set_context', the value of 'enable_compile_cache' must be a bool (true or "
      "false), but got 1.");
}

TEST_F(ContextTest, ModeValues) {
  EXPECT_EQ(
      set_error({{"mode", 2}}),
      "For 'context.set_context', the value of 'mode' must be GRAPH_MODE (0) or PYNATIVE_MODE "
      "(1), but got 2.");
  EXPECT_THAT(set_error({{"mode", "EAGER"}}), HasSubstr("but got 'EAGER'."));
  EXPECT_THAT(set_error({{"mode", true}}), HasSubstr("but got true."));
}

TEST_F(ContextTest, SaveGraphsValues) {
  EXPECT_EQ(
      set_error({{"save_graphs", 4}}),
      "For 'context.set_context', the value of 'save_graphs' must be one of [0, 1, 2, 3, true, "
      "false], but got 4.");
  EXPECT_THAT(set_error({{"save_graphs", "2"}}), HasSubstr("but got '2'."));
}

TEST_F(ContextTest, ChoiceValues) {
  EXPECT_EQ(set_error({{"deterministic", "on"}}),
            "For 'context.set_context', the value of 'deterministic' must be one of [ON, OFF], but "
            "got 'on'.");
  EXPECT_THAT(set_error({{"debug_level", "VERBOSE"}}), HasSubstr("one of [RELEASE, DEBUG]"));
  EXPECT_THAT(set_error({{"jit_syntax_level", "LOOSE"}}),
              HasSubstr("one of [STRICT, COMPATIBLE, LAX]"));
  EXPECT_THAT(set_error({{"memory_optimize_level", "O2"}}), HasSubstr("one of [O0, O1]"));
  EXPECT_THAT(set_error({{"memory_offload", "Off"}}), HasSubstr("one of [ON, OFF]"));
  set({{"jit_syntax_level", "COMPATIBLE"}});
  EXPECT_EQ(get("jit_syntax_level"), "COMPATIBLE");
  set({{"aoe_tune_mode", "offline"}});
  set({{"aoe_tune_mode", ""}});  // back to "not set"
  EXPECT_EQ(get("aoe_tune_mode"), "");
}

TEST_F(ContextTest, MemorySizes) {
  set({{"max_device_memory", "3.5GB"}, {"mempool_block_size", "1GB"}});
  EXPECT_EQ(get("max_device_memory"), "3.5GB");
  set({{"max_device_memory", "0.5GB"}});
  EXPECT_EQ(set_error({{"max_device_memory", "1024MB"}}),
            "For 'context.set_context', the value of 'max_device_memory' must be a size such as "
            "\"3.5GB\", above 0GB, but got '1024MB'.");
  for (const char* bad : {"0GB", "GB", "1.GB", ".5GB", "01GB", "1 GB", "1gb", "-1GB", "1.2.3GB"}) {
    EXPECT_THAT(set_error({{"max_device_memory", bad}}), HasSubstr("must be a size")) << bad;
  }
  EXPECT_EQ(set_error({{"mempool_block_size", "0.5GB"}}),
            "For 'context.set_context', the value of 'mempool_block_size' must be a size such as "
            "\"2GB\", at least 1GB, but got '0.5GB'.");
  EXPECT_THAT(set_error({{"mempool_block_size", 2}}), HasSubstr("but got 2."));
}

TEST(ContextMemorySizeTest, ParsesToBytes) {
  EXPECT_EQ(parse_memory_size("1GB"), 1ull << 30);
  EXPECT_EQ(parse_memory_size("1024GB"), 1ull << 40);
  EXPECT_EQ(parse_memory_size("3.5GB"), 3ull * (1ull << 30) + (1ull << 29));
  EXPECT_THROW(parse_memory_size("1TB"), Error);
  EXPECT_THROW(parse_memory_size("0.0GB"), Error);
}

TEST_F(ContextTest, DictSubKeysAreChecked) {
  EXPECT_EQ(
      set_error({{"jit_config", {{"jit_level", "O3"}}}}),
      "For 'context.set_context', the value of 'jit_config.jit_level' must be one of [O0, O1, "
      "O2], but got 'O3'.");
  EXPECT_EQ(set_error({{"jit_config", {{"jit_levels", "O1"}}}}),
            "For 'context.set_context', 'jit_config' has no sub-key 'jit_levels'; did you mean "
            "'jit_level'? (valid sub-keys: jit_level, infer_boost)");
  EXPECT_THAT(set_error({{"jit_config", "O1"}}),
              HasSubstr("the value of 'jit_config' must be a dict with sub-keys jit_level, "
                        "infer_boost, but got 'O1'."));
  EXPECT_THAT(set_error({{"aoe_config", {{"job_type", "3"}}}}), HasSubstr("one of [1, 2]"));
  EXPECT_THAT(set_error({{"gpu_config", {{"conv_fprop_algo", "fastest"}}}}),
              HasSubstr("'gpu_config.conv_fprop_algo' must be one of [normal, performance"));
  EXPECT_THAT(set_error({{"gpu_config", {{"conv_allow_tf32", "yes"}}}}),
              HasSubstr("'gpu_config.conv_allow_tf32' must be a bool"));
  EXPECT_THAT(set_error({{"ascend_config", {{"atomic_clean_policy", 2}}}}),
              HasSubstr("'ascend_config.atomic_clean_policy' must be an integer in [0, 1]"));
  EXPECT_THAT(set_error({{"ascend_config", {{"ge_options", {{"local", Json::object()}}}}}}),
              HasSubstr("'ascend_config.ge_options' is invalid: its keys must be \"global\" or "
                        "\"session\", got 'local'."));
  set({{"ascend_config",
        {{"precision_mode", "force_fp32"}, {"ge_options", {{"global", {{"a", "1"}}}}}}}});
  EXPECT_EQ(get("ascend_config.precision_mode"), "force_fp32");
  EXPECT_EQ(get("ascend_config.exception_dump"), "2");
}

TEST_F(ContextTest, GraphKernelFlagsAreValidatedAtSet) {
  EXPECT_EQ(set_error({{"graph_kernel_flags", "--opt_level=high"}}),
            "For 'context.set_context', the value of 'graph_kernel_flags' is invalid: "
            "graph_kernel_flags: '--opt_level=high' needs an integer in [0, 3], for example "
            "--opt_level=2");
  // MindSpore clamps a level above 3 (with a warning) instead of refusing it.
  set({{"graph_kernel_flags", "--opt_level=5"}});
  EXPECT_EQ(derive_policy(snapshot()).fusion_level.value, 3);
  set({{"graph_kernel_flags", "--opt_level=1 --dump_as_text"}});
  EXPECT_EQ(get("graph_kernel_flags"), "--opt_level=1 --dump_as_text");
}

TEST(ContextValueFromTextTest, ConvertsByDeclaredType) {
  const auto& keys = context_keys();
  const auto text = [&](std::string_view key, std::string_view value) {
    return value_from_text(kSetContextApi, *find_key(keys, key), value);
  };
  EXPECT_EQ(text("pynative_synchronize", "true"), true);
  EXPECT_EQ(text("pynative_synchronize", "0"), false);
  EXPECT_EQ(text("pynative_synchronize", "False"), false);
  EXPECT_EQ(text("max_call_depth", "80"), 80);
  EXPECT_EQ(text("mode", "0"), 0);
  EXPECT_EQ(text("mode", "GRAPH_MODE"), "GRAPH_MODE");
  EXPECT_EQ(text("save_graphs", "true"), true);
  EXPECT_EQ(text("save_graphs", "3"), 3);
  EXPECT_EQ(text("save_graphs_path", "./ir"), "./ir");
  EXPECT_EQ(text("jit_config", R"({"jit_level": "O1"})"), (Json{{"jit_level", "O1"}}));
  EXPECT_EQ(error_message([&] { text("pynative_synchronize", "yes"); }),
            "For 'context.set_context', the value of 'pynative_synchronize' must be a bool (true, "
            "false, 1 or 0), but got 'yes'.");
  EXPECT_EQ(error_message([&] { text("max_call_depth", "ten"); }),
            "For 'context.set_context', the value of 'max_call_depth' must be an integer >= 1, "
            "but got 'ten'.");
  EXPECT_THAT(error_message([&] { text("jit_config", "{oops"); }),
              HasSubstr("the value of 'jit_config' must be written as JSON"));
}

TEST_F(ContextTest, ParseAssignmentsBuildsTypedObjects) {
  const Json parsed = parse_assignments(
      {"jit_config.jit_level=O1", "save_graphs=2", "mode=GRAPH_MODE", "jit_config.infer_boost=on",
       "pynative_synchronize=1", "save_graphs_path=a=b", "auto_parallel_context.device_num=8"});
  EXPECT_EQ(parsed, (Json{{"jit_config", {{"jit_level", "O1"}, {"infer_boost", "on"}}},
                          {"save_graphs", 2},
                          {"mode", "GRAPH_MODE"},
                          {"pynative_synchronize", true},
                          {"save_graphs_path", "a=b"},
                          {"auto_parallel_context", {{"device_num", 8}}}}));
  set(parsed);
  EXPECT_EQ(get("mode"), 0);
  EXPECT_EQ(get("auto_parallel_context.device_num"), 8);
}

TEST_F(ContextTest, SetFromAssignments) {
  set_from({"mode=0", "jit_config.jit_level=O2", "enable_graph_kernel=true"});
  EXPECT_EQ(get("mode"), 0);
  EXPECT_EQ(get("jit_config.jit_level"), "O2");
  EXPECT_EQ(get("enable_graph_kernel"), true);
  error_message([] { set_from({"mode=1", "save_graphs=9"}); });
  EXPECT_EQ(get("mode"), 0);
}

TEST_F(ContextTest, ParseAssignmentsRejectsMalformedItems) {
  EXPECT_EQ(error_message([] { parse_assignments({"save_graphs"}); }),
            "--set 'save_graphs': expected key=value, for example save_graphs=2 or "
            "jit_config.jit_level=O1");
  EXPECT_THAT(error_message([] { parse_assignments({"=2"}); }), HasSubstr("expected key=value"));
  EXPECT_THAT(error_message([] { parse_assignments({"save_grahps=2"}); }),
              HasSubstr("'save_grahps' is not recognized; did you mean 'save_graphs'"));
  EXPECT_THAT(error_message([] { parse_assignments({"jit_config.level=O1"}); }),
              HasSubstr("'jit_config' has no sub-key 'level'"));
  EXPECT_THAT(error_message([] { parse_assignments({"mode.x=1"}); }),
              HasSubstr("--set 'mode.x=1': 'mode' is a int|str, not a dict"));
  EXPECT_THAT(error_message([] { parse_assignments({"max_call_depth=deep"}); }),
              HasSubstr("'max_call_depth' must be an integer >= 1, but got 'deep'"));
}

}  // namespace
}  // namespace mf::context
