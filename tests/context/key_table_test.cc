#include "context/key_table.h"

#include <gtest/gtest.h>

#include <set>

namespace mf::context {
namespace {

TEST(ContextKeyTableTest, ListsEveryKeyOfTheIssueOnce) {
  const std::set<std::string> expected = {"mode",
                                          "device_target",
                                          "device_id",
                                          "max_device_memory",
                                          "variable_memory_max_size",
                                          "mempool_block_size",
                                          "op_timeout",
                                          "save_graphs",
                                          "save_graphs_path",
                                          "enable_dump",
                                          "save_dump_path",
                                          "deterministic",
                                          "print_file_path",
                                          "env_config_path",
                                          "precompile_only",
                                          "reserve_class_name_in_scope",
                                          "pynative_synchronize",
                                          "debug_level",
                                          "enable_graph_kernel",
                                          "graph_kernel_flags",
                                          "enable_reduce_precision",
                                          "aoe_tune_mode",
                                          "aoe_config",
                                          "check_bprop",
                                          "max_call_depth",
                                          "grad_for_scalar",
                                          "enable_compile_cache",
                                          "compile_cache_path",
                                          "inter_op_parallel_num",
                                          "runtime_num_threads",
                                          "disable_format_transform",
                                          "support_binary",
                                          "memory_optimize_level",
                                          "memory_offload",
                                          "ascend_config",
                                          "jit_syntax_level",
                                          "exec_order",
                                          "gpu_config",
                                          "jit_config",
                                          "enable_profiling",
                                          "profiling_options",
                                          "enable_sparse",
                                          "auto_tune_mode"};
  std::set<std::string> names;
  for (const auto& spec : context_keys()) {
    EXPECT_TRUE(names.insert(spec.name).second) << "duplicate " << spec.name;
    EXPECT_FALSE(spec.doc.empty()) << spec.name;
    EXPECT_FALSE(spec.on_cpu.empty()) << spec.name;
    // An inert key says why in words starting "none: "; an effective one says what it does.
    EXPECT_EQ(spec.on_cpu.starts_with("none"), !spec.effective_on_cpu) << spec.name;
  }
  EXPECT_EQ(names, expected);
}

TEST(ContextKeyTableTest, DevicesFollowTheDocumentsTable) {
  EXPECT_EQ(device_names(find_key(context_keys(), "op_timeout")->devices), "GPU/Ascend");
  EXPECT_EQ(device_names(find_key(context_keys(), "gpu_config")->devices), "GPU");
  EXPECT_EQ(device_names(find_key(context_keys(), "ascend_config")->devices), "Ascend");
  EXPECT_EQ(device_names(find_key(context_keys(), "mode")->devices), "CPU/GPU/Ascend");
  EXPECT_FALSE(find_key(context_keys(), "op_timeout")->effective_on_cpu);
  // This engine gives these a real effect on CPU although the documents list GPU/Ascend.
  for (const char* name : {"enable_graph_kernel", "graph_kernel_flags", "max_device_memory",
                           "mempool_block_size", "deterministic", "print_file_path"}) {
    const KeySpec* spec = find_key(context_keys(), name);
    EXPECT_FALSE(spec->devices & kCpu) << name;
    EXPECT_TRUE(spec->effective_on_cpu) << name;
  }
}

TEST(ContextKeyTableTest, ClosestKeysSuggestTypos) {
  EXPECT_EQ(closest_keys(context_keys(), "save_graph").front(), "save_graphs");
  EXPECT_EQ(closest_keys(context_keys(), "mdoe").front(), "mode");
  EXPECT_TRUE(closest_keys(context_keys(), "completely_unrelated_words").empty());
  EXPECT_LE(closest_keys(context_keys(), "enable_x").size(), 3u);
}

TEST(ContextKeyTableTest, DescribesTypesAndAllowedValues) {
  EXPECT_EQ(type_name(*find_key(context_keys(), "save_graphs")), "bool|int");
  EXPECT_EQ(allowed_values(*find_key(context_keys(), "device_id")), "[0, 4095]");
  EXPECT_EQ(allowed_values(*find_key(context_keys(), "deterministic")), "ON, OFF");
  EXPECT_EQ(allowed_values(*find_key(context_keys(), "jit_config")),
            "sub-keys jit_level, infer_boost");
}

TEST(ContextKeyTableTest, DefaultsSkipAliases) {
  const Json defaults = defaults_of(context_keys());
  EXPECT_FALSE(defaults.contains("variable_memory_max_size"));
  EXPECT_EQ(defaults["jit_config"], (Json{{"jit_level", ""}, {"infer_boost", "off"}}));
}

}  // namespace
}  // namespace mf::context
