// MindSpore 2.5+'s replacement functions and environment variables: each sets the same key of the
// one key table, `explain` names what set it, and the environment's precedence against set_context
// follows MindSpore.

#include "context/replacement_api.h"

#include <map>

#include "context/policy.h"
#include "tests/context/context_fixture.h"

namespace mf::context {
namespace {

using ::testing::HasSubstr;

class ReplacementApiTest : public ContextTest {};

// The reason `explain` gives for "set_by.<key>", or "" when there is none.
std::string set_by(std::string_view key) {
  for (const auto& line : explain(derive_policy(snapshot()))) {
    if (line.name == "set_by." + std::string(key)) return line.reason;
  }
  return "";
}

TEST_F(ReplacementApiTest, EachFunctionSetsItsKeyAndExplainNamesIt) {
  set_device("CPU", 0);
  EXPECT_EQ(get("device_target"), "CPU");
  set_deterministic(true);
  EXPECT_EQ(get("deterministic"), "ON");
  EXPECT_EQ(set_by("deterministic"), "set by set_deterministic()");
  set_recursion_limit(80);
  EXPECT_EQ(get("max_call_depth"), 80);
  context::runtime::set_memory("1GB", "2GB", "8GB", "O1");
  EXPECT_EQ(get("mempool_block_size"), "2GB");
  EXPECT_EQ(get("max_device_memory"), "8GB");
  EXPECT_EQ(get("memory_optimize_level"), "O1");
  EXPECT_EQ(set_by("max_device_memory"), "set by runtime.set_memory()");
  // Arguments left out take MindSpore's defaults again, not the values of the last call.
  context::runtime::set_memory("1GB", "", "", "", "1GB");
  EXPECT_EQ(get("mempool_block_size"), "2GB");
  EXPECT_EQ(get("max_device_memory"), "1024GB");
  EXPECT_EQ(get("memory_optimize_level"), "O0");
  context::runtime::set_memory("1GB", "2GB", "8GB", "O1");
  context::runtime::launch_blocking();
  EXPECT_EQ(get("pynative_synchronize"), true);
  context::runtime::dispatch_threads_num(2);
  EXPECT_EQ(get("inter_op_parallel_num"), 2);
  context::device_context::cpu::op_tuning::threads_num(1);
  EXPECT_EQ(get("runtime_num_threads"), 1);
  const Policy p = derive_policy(snapshot());
  EXPECT_THAT(p.intra_op_threads.reason,
              HasSubstr("(set by device_context.cpu.op_tuning.threads_num)"));
  EXPECT_THAT(p.max_call_depth.reason, HasSubstr("(set by set_recursion_limit)"));
  // set_context afterwards takes the key back, and explain says nothing extra.
  set({{"deterministic", "OFF"}});
  EXPECT_EQ(set_by("deterministic"), "");
}

TEST_F(ReplacementApiTest, BadValuesFailAsSetContextWouldAndChangeNothing) {
  EXPECT_THAT(error_message([] { set_recursion_limit(0); }), HasSubstr("max_call_depth"));
  EXPECT_THAT(error_message([] { context::runtime::set_memory("", "", "0.5XB"); }),
              HasSubstr("max_device_memory"));
  EXPECT_THAT(error_message([] { context::runtime::set_memory("lots"); }), HasSubstr("init_size"));
  EXPECT_THAT(error_message([] { context::runtime::set_memory("1GB", "", "", "", "huge"); }),
              HasSubstr("huge_page_reserve_size"));
  EXPECT_THAT(error_message([] { context::runtime::set_memory("", "1GB", "", "O3"); }),
              HasSubstr("memory_optimize_level"));
  EXPECT_EQ(get("mempool_block_size"), "1GB");  // the whole call failed
  EXPECT_THAT(error_message([] { set_device("GPU"); }, ErrorKind::kUnsupported), HasSubstr("GPU"));
}

std::function<const char*(const char*)> environment(std::map<std::string, std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

TEST_F(ReplacementApiTest, SaveGraphsVariablesWinOverSetContextAsInMindSpore) {
  configure_from_environment(environment({{"MS_DEV_SAVE_GRAPHS", "2"},
                                          {"MS_DEV_SAVE_GRAPHS_PATH", "/tmp/env_ir"},
                                          {"MS_DEV_PRECOMPILE_ONLY", "1"}}));
  EXPECT_EQ(get("save_graphs"), 2);
  EXPECT_EQ(set_by("save_graphs"), "set by MS_DEV_SAVE_GRAPHS (environment variable)");
  set({{"save_graphs", 1}, {"save_graphs_path", "./mine"}, {"precompile_only", false}});
  EXPECT_EQ(get("save_graphs"), 2);
  EXPECT_EQ(get("save_graphs_path"), "/tmp/env_ir");
  EXPECT_EQ(get("precompile_only"), true);
  // A bad value is still an error, and reset keeps what the environment says.
  EXPECT_THAT(error_message([] { set({{"save_graphs", 7}}); }), HasSubstr("save_graphs"));
  reset();
  EXPECT_EQ(get("save_graphs"), 2);
  EXPECT_THAT(derive_policy(snapshot()).dump_level.reason,
              HasSubstr("(set by MS_DEV_SAVE_GRAPHS)"));
  // Variables no longer set release their keys.
  configure_from_environment(environment({}));
  set({{"save_graphs", 1}});
  EXPECT_EQ(get("save_graphs"), 1);
  reset();
  EXPECT_EQ(get("save_graphs"), 0);
}

// MindSpore ORs MS_COMPILER_CACHE_ENABLE=1 with enable_compile_cache (set_context cannot turn the
// cache off then); the path and MS_COMPILER_CACHE_ENABLE=0 yield to set_context.
TEST_F(ReplacementApiTest, CompileCacheVariablesAsInMindSpore) {
  configure_from_environment(environment(
      {{"MS_COMPILER_CACHE_ENABLE", "1"}, {"MS_COMPILER_CACHE_PATH", "/tmp/env_cache"}}));
  EXPECT_EQ(get("enable_compile_cache"), true);
  EXPECT_EQ(get("compile_cache_path"), "/tmp/env_cache");
  EXPECT_EQ(set_by("compile_cache_path"), "set by MS_COMPILER_CACHE_PATH (environment variable)");
  set({{"enable_compile_cache", false}, {"compile_cache_path", "./mine"}});
  EXPECT_EQ(get("enable_compile_cache"), true);
  EXPECT_EQ(get("compile_cache_path"), "./mine");
  configure_from_environment(environment({{"MS_COMPILER_CACHE_ENABLE", "0"}}));
  EXPECT_EQ(get("enable_compile_cache"), false);
  set({{"enable_compile_cache", true}});
  EXPECT_EQ(get("enable_compile_cache"), true);
}

TEST_F(ReplacementApiTest, GraphKernelFlagsVariableWinsOverSetContext) {
  configure_from_environment(environment({{"MS_DEV_GRAPH_KERNEL_FLAGS", "--opt_level=3"}}));
  set({{"graph_kernel_flags", "--opt_level=1"}});
  EXPECT_EQ(get("graph_kernel_flags"), "--opt_level=3");
  EXPECT_EQ(derive_policy(snapshot()).fusion_level.value, 3);
  configure_from_environment(environment({}));
  set({{"graph_kernel_flags", "--opt_level=1"}});
  EXPECT_EQ(get("graph_kernel_flags"), "--opt_level=1");
}

TEST_F(ReplacementApiTest, BadEnvironmentValuesNameTheVariable) {
  EXPECT_EQ(error_message([] {
              configure_from_environment(environment({{"MS_DEV_SAVE_GRAPHS", "true"}}));
            }),
            "environment variable MS_DEV_SAVE_GRAPHS='true' is not valid; use a digit from 0 to 3");
  EXPECT_THAT(error_message([] {
                configure_from_environment(environment({{"MS_COMPILER_CACHE_ENABLE", "2"}}));
              }),
              HasSubstr("MS_COMPILER_CACHE_ENABLE"));
  EXPECT_EQ(get("save_graphs"), 0);
}

}  // namespace
}  // namespace mf::context
