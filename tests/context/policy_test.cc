#include "context/policy.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/context/context_fixture.h"

namespace mf::context {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Policy policy_with(const Json& change, std::optional<JitLevel> network = {}, int cores = 8) {
  set(change);
  return derive_policy(snapshot(), DeriveOptions{.network_jit_level = network, .cores = cores});
}

TEST_F(ContextTest, DefaultPolicy) {
  const Policy p = policy_with(Json::object());
  EXPECT_EQ(p.mode.value, ExecutionMode::kPynative);
  EXPECT_EQ(p.mode.reason,
            "mode=PYNATIVE_MODE (1) (default): ops run one by one as they are called");
  EXPECT_EQ(p.jit_level.value, JitLevel::kO0);
  EXPECT_THAT(p.jit_level.reason,
              HasSubstr("jit_config.jit_level is empty, which means O0 on CPU"));
  EXPECT_EQ(p.fusion_level.value, 0);
  EXPECT_EQ(p.dump_level.value, 0);
  EXPECT_EQ(p.dump_dir.value, ".");
  EXPECT_FALSE(p.compile_cache.value);
  EXPECT_EQ(p.compile_cache_dir.value, "./rank_0");
  EXPECT_EQ(p.intra_op_threads.value, 8);
  EXPECT_EQ(p.inter_op_parallelism.value, 1);
  EXPECT_EQ(p.max_device_memory_bytes.value, 1ull << 40);
  EXPECT_EQ(p.mempool_block_bytes.value, 1ull << 30);
  EXPECT_EQ(p.memory_optimize_level.value, MemoryOptimizeLevel::kO0);
  EXPECT_TRUE(p.memory_reuse.value);
  EXPECT_FALSE(p.rdr.value.enable);
  EXPECT_FALSE(p.deterministic.value);
  EXPECT_EQ(p.debug_level.value, DebugLevel::kRelease);
  EXPECT_FALSE(p.precompile_only.value);
  EXPECT_FALSE(p.pynative_synchronize.value);
  EXPECT_TRUE(p.reserve_class_name_in_scope.value);
  EXPECT_EQ(p.max_call_depth.value, 1000);
  EXPECT_EQ(p.print_file_path.value, "");
  EXPECT_EQ(p.device_num.value, 1);
  EXPECT_EQ(p.global_rank.value, 0);
  EXPECT_TRUE(p.ineffective_keys.empty());
}

TEST_F(ContextTest, ModeDecision) {
  const Policy p = policy_with({{"mode", "GRAPH_MODE"}});
  EXPECT_EQ(p.mode.value, ExecutionMode::kGraph);
  EXPECT_EQ(p.mode.reason, "mode=GRAPH_MODE (0): networks are traced and compiled as whole graphs");
}

TEST_F(ContextTest, JitLevelFromGlobalConfig) {
  const Policy p = policy_with({{"mode", 0}, {"jit_config.jit_level", "O2"}});
  EXPECT_EQ(p.jit_level.value, JitLevel::kO2);
  EXPECT_EQ(p.jit_level.reason, "jit_config.jit_level='O2'");
}

TEST_F(ContextTest, NetworkJitConfigBeatsTheGlobalOne) {
  const Policy p = policy_with({{"mode", 0}, {"jit_config.jit_level", "O2"}}, JitLevel::kO1);
  EXPECT_EQ(p.jit_level.value, JitLevel::kO1);
  EXPECT_EQ(p.jit_level.reason,
            "the network's own JitConfig asks for O1, which beats the global "
            "jit_config.jit_level='O2'");
  EXPECT_EQ(derive_policy(snapshot(), JitLevel::kO0).jit_level.value, JitLevel::kO0);
}

// MindSpore never sinks a jit region of a PYNATIVE run: O2 there is O0, with MindSpore's words.
TEST_F(ContextTest, InPynativeAJitRegionAskedForO2RunsAtO0) {
  const Policy p = policy_with({{"mode", 1}, {"jit_config.jit_level", "O2"}});
  EXPECT_EQ(p.jit_level.value, JitLevel::kO0);
  EXPECT_EQ(p.executor.value, Executor::kKernelByKernel);
  EXPECT_THAT(p.jit_level.reason,
              HasSubstr("Pynative mode can not set jit_level to O2, use O0 instead"));
  EXPECT_EQ(policy_with({{"mode", 0}, {"jit_config.jit_level", "O2"}}).jit_level.value,
            JitLevel::kO2);
}

// In PYNATIVE_MODE the compile settings apply to jit-compiled cells and functions, and explain
// says so instead of reporting them active for the op-by-op code.
TEST_F(ContextTest, InPynativeCompileSettingsApplyToJitCompiledPartsOnly) {
  const Policy p = policy_with({{"mode", 1}, {"jit_config.jit_level", "O1"}});
  EXPECT_EQ(p.jit_level.value, JitLevel::kO1);
  EXPECT_EQ(p.executor.value, Executor::kKernelByKernel);
  for (const std::string* reason :
       {&p.jit_level.reason, &p.executor.reason, &p.fusion_level.reason, &p.dump_level.reason,
        &p.compile_cache.reason, &p.precompile_only.reason}) {
    EXPECT_THAT(*reason, HasSubstr("PYNATIVE_MODE: applies to jit-compiled cells and functions "
                                   "only; the rest runs op by op"));
  }
  context::set({{"mode", 1}, {"jit_config", {{"jit_level", "O1"}}}});
  const Policy region = derive_policy(snapshot(), DeriveOptions{.jit_region = true});
  EXPECT_THAT(region.jit_level.reason,
              HasSubstr("for this jit-compiled part of a PYNATIVE_MODE run"));
  const Policy graph = policy_with({{"mode", 0}, {"jit_config.jit_level", "O1"}});
  EXPECT_EQ(graph.jit_level.reason, "jit_config.jit_level='O1'");
  EXPECT_EQ(graph.executor.value, Executor::kKernelByKernel);
  EXPECT_THAT(graph.executor.reason, HasSubstr("KernelExecutor"));
}

TEST_F(ContextTest, FusionFlagsOverrideEnableGraphKernel) {
  const Policy p = policy_with({{"graph_kernel_flags", "--opt_level=2"}});
  EXPECT_EQ(p.fusion_level.value, 2);
  EXPECT_THAT(p.fusion_level.reason,
              ::testing::StartsWith("fusion opt_level=2 because graph_kernel_flags='--opt_level=2' "
                                    "overrides enable_graph_kernel=false and jit_level=O0"));
  const Policy off =
      policy_with({{"enable_graph_kernel", true}, {"graph_kernel_flags", "--opt_level=0"}});
  EXPECT_EQ(off.fusion_level.value, 0);
  EXPECT_THAT(off.fusion_level.reason, HasSubstr("overrides enable_graph_kernel=true"));
}

TEST_F(ContextTest, EnableGraphKernelMeansLevelTwo) {
  const Policy p =
      policy_with({{"enable_graph_kernel", true}, {"graph_kernel_flags", "--dump_as_text"}});
  EXPECT_EQ(p.fusion_level.value, 2);
  EXPECT_THAT(p.fusion_level.reason, HasSubstr("enable_graph_kernel=true turns fusion on"));
  EXPECT_TRUE(p.fusion_flags.dump_as_text);
}

TEST_F(ContextTest, JitO1TurnsFusionOn) {
  const Policy p = policy_with({{"mode", 0}, {"jit_config.jit_level", "O1"}});
  EXPECT_EQ(p.fusion_level.value, 2);
  EXPECT_THAT(p.fusion_level.reason,
              HasSubstr("fusion opt_level=2 because jit_level=O1 turns on automatic graph-kernel "
                        "fusion"));
  const Policy off = policy_with({{"graph_kernel_flags", "--opt_level=0"}});
  EXPECT_EQ(off.fusion_level.value, 0);
}

TEST_F(ContextTest, StitchAndParallelFusion) {
  Policy p = policy_with({{"graph_kernel_flags", "--opt_level=3"}});
  EXPECT_TRUE(p.stitch_fusion.value);
  EXPECT_TRUE(p.parallel_fusion.value);
  EXPECT_EQ(p.stitch_fusion.reason, "fusion opt_level=3 includes it");
  EXPECT_FALSE(p.recompute_fusion.value);
  p = policy_with(
      {{"graph_kernel_flags", "--opt_level=1 --enable_stitch_fusion --enable_recompute_fusion"}});
  EXPECT_TRUE(p.stitch_fusion.value);
  EXPECT_EQ(p.stitch_fusion.reason, "graph_kernel_flags gives --enable_stitch_fusion");
  EXPECT_FALSE(p.parallel_fusion.value);
  EXPECT_TRUE(p.recompute_fusion.value);
  p = policy_with({{"graph_kernel_flags", "--opt_level=0 --enable_stitch_fusion"}});
  EXPECT_FALSE(p.stitch_fusion.value);
  EXPECT_EQ(p.stitch_fusion.reason, "fusion is off");
}

TEST_F(ContextTest, DumpLevelAndDirectory) {
  Policy p = policy_with({{"save_graphs", true}, {"save_graphs_path", "./ir"}});
  EXPECT_EQ(p.dump_level.value, 2);
  EXPECT_THAT(p.dump_level.reason, HasSubstr("save_graphs=2: the IR after every pass"));
  EXPECT_EQ(p.dump_dir.value, "./ir");
  EXPECT_THAT(p.dump_dir.reason, HasSubstr("no rank_<id>/ below it: device_num=1"));
  set_auto_parallel_context({{"device_num", 8}, {"global_rank", 3}});
  p = derive_policy(snapshot());
  EXPECT_EQ(p.dump_dir.value, "./ir/rank_3");
  EXPECT_EQ(p.dump_dir.reason,
            "save_graphs_path='./ir' with rank_3/ below it because device_num=8 > 1");
  EXPECT_EQ(p.compile_cache_dir.value, "./rank_3");
  EXPECT_EQ(p.device_num.value, 8);
  EXPECT_EQ(p.global_rank.value, 3);
}

TEST_F(ContextTest, RankMustBeBelowDeviceNum) {
  set_auto_parallel_context({{"device_num", 4}, {"global_rank", 4}});
  EXPECT_EQ(error_message([] { derive_policy(snapshot()); }),
            "For 'context.set_auto_parallel_context', global_rank=4 is out of range for "
            "device_num=4; it must be below device_num");
}

TEST_F(ContextTest, CompileCacheDecision) {
  const Policy p = policy_with({{"enable_compile_cache", true}, {"compile_cache_path", "/tmp/cc"}});
  EXPECT_TRUE(p.compile_cache.value);
  EXPECT_THAT(p.compile_cache.reason,
              HasSubstr("enable_compile_cache=true: compiled graphs are stored"));
  EXPECT_EQ(p.compile_cache_dir.value, "/tmp/cc/rank_0");
  EXPECT_THAT(p.compile_cache_dir.reason, HasSubstr("with rank_0/ below it (global_rank=0)"));
}

TEST_F(ContextTest, ThreadsInEffect) {
  Policy p = policy_with(Json::object(), {}, 4);
  EXPECT_EQ(p.intra_op_threads.value, 4);
  EXPECT_EQ(p.intra_op_threads.reason,
            "runtime_num_threads=30 (default) is capped to the machine's 4 cores");
  EXPECT_EQ(get("runtime_num_threads"), 30);  // the stored value stays as set
  p = policy_with({{"runtime_num_threads", 2}}, {}, 4);
  EXPECT_EQ(p.intra_op_threads.value, 2);
  EXPECT_EQ(p.intra_op_threads.reason, "runtime_num_threads=2");
  p = policy_with({{"runtime_num_threads", 0}}, {}, 6);
  EXPECT_EQ(p.intra_op_threads.value, 6);
  EXPECT_EQ(p.intra_op_threads.reason, "runtime_num_threads=0 means every core: 6 cores");
  p = policy_with({{"inter_op_parallel_num", 3}}, {}, 8);
  EXPECT_EQ(p.inter_op_parallelism.value, 3);
  p = policy_with({{"inter_op_parallel_num", 16}}, {}, 8);
  EXPECT_EQ(p.inter_op_parallelism.value, 8);
  EXPECT_THAT(p.inter_op_parallelism.reason, HasSubstr("capped to the machine's 8 cores"));
  EXPECT_GE(derive_policy(snapshot()).intra_op_threads.value, 1);  // the real machine
}

// A queue thread for asynchronous PYNATIVE ops only where the intra-op threads leave a core idle.
TEST_F(ContextTest, QueueThreadOnlyBesideAnIdleCore) {
  Policy p = policy_with(Json::object(), {}, 4);  // default: every core
  EXPECT_FALSE(p.pynative_synchronize.value);
  EXPECT_FALSE(p.pynative_queue_thread.value);
  EXPECT_THAT(p.pynative_queue_thread.reason, HasSubstr("take every core (4 of 4)"));
  EXPECT_THAT(p.pynative_queue_thread.reason, HasSubstr("still surface at the next sync point"));
  p = policy_with({{"runtime_num_threads", 3}}, {}, 4);
  EXPECT_TRUE(p.pynative_queue_thread.value);
  EXPECT_THAT(p.pynative_queue_thread.reason, HasSubstr("3 intra-op threads of 4 cores"));
  p = policy_with({{"runtime_num_threads", 1}, {"pynative_synchronize", true}}, {}, 4);
  EXPECT_FALSE(p.pynative_queue_thread.value);
  EXPECT_THAT(p.pynative_queue_thread.reason, HasSubstr("pynative_synchronize=true"));
  p = policy_with({{"runtime_num_threads", 1}}, {}, 1);
  EXPECT_FALSE(p.pynative_queue_thread.value);
}

TEST_F(ContextTest, MemoryDecisions) {
  Policy p = policy_with({{"max_device_memory", "2GB"},
                          {"mempool_block_size", "1GB"},
                          {"memory_optimize_level", "O1"}});
  EXPECT_EQ(p.max_device_memory_bytes.value, 2ull << 30);
  EXPECT_EQ(p.mempool_block_bytes.value, 1ull << 30);
  EXPECT_EQ(p.memory_optimize_level.value, MemoryOptimizeLevel::kO1);
  EXPECT_THAT(p.memory_optimize_level.reason, HasSubstr("planned ahead in one arena, with reuse"));
  p = policy_with({{"max_device_memory", "1.5GB"}, {"mempool_block_size", "2GB"}});
  EXPECT_EQ(p.mempool_block_bytes.value, 3ull << 29);
  EXPECT_THAT(p.mempool_block_bytes.reason, HasSubstr("is larger than max_device_memory='1.5GB'"));
  // Set away from their defaults, the device keys say that here they act on the CPU pool.
  EXPECT_THAT(p.max_device_memory_bytes.reason,
              HasSubstr("a GPU/Ascend key in MindSpore, ignored there on CPU"));
  reset();
  p = policy_with(Json::object());
  EXPECT_THAT(p.max_device_memory_bytes.reason, Not(HasSubstr("GPU/Ascend key")));
}

TEST_F(ContextTest, EnvConfigDrivesMemoryReuseAndRdr) {
  const auto file = std::filesystem::temp_directory_path() /
                    ("mf_policy_env_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << R"({"rdr": {"enable": true, "mode": 2, "path": "/tmp/rdr"},
                             "sys": {"mem_Reuse": false}})";
  const Policy p = policy_with({{"env_config_path", file.string()}});
  EXPECT_FALSE(p.memory_reuse.value);
  EXPECT_EQ(p.memory_reuse.reason,
            "sys.mem_Reuse=false in env_config_path file '" + file.string() +
                "' (matters at memory_optimize_level=O1 only: O0 pools every tensor)");
  EXPECT_TRUE(p.rdr.value.enable);
  EXPECT_EQ(p.rdr.value.mode, 2);
  EXPECT_EQ(p.rdr.value.path, "/tmp/rdr");
}

TEST_F(ContextTest, SimpleSwitches) {
  const Policy p = policy_with({{"deterministic", "ON"},
                                {"debug_level", "DEBUG"},
                                {"precompile_only", true},
                                {"pynative_synchronize", true},
                                {"reserve_class_name_in_scope", false},
                                {"max_call_depth", 80},
                                {"print_file_path", "print.pb"},
                                {"jit_config.infer_boost", "on"}});
  EXPECT_TRUE(p.deterministic.value);
  EXPECT_THAT(p.deterministic.reason,
              ::testing::StartsWith("deterministic='ON': matmuls in fixed row blocks"));
  EXPECT_THAT(p.debug_level.reason, HasSubstr("verified after every pass"));
  EXPECT_EQ(p.debug_level.value, DebugLevel::kDebug);
  EXPECT_TRUE(p.precompile_only.value);
  EXPECT_THAT(p.precompile_only.reason,
              ::testing::StartsWith(
                  "precompile_only=true: networks are compiled (and dumped) but not run"));
  EXPECT_TRUE(p.pynative_synchronize.value);
  EXPECT_THAT(p.pynative_synchronize.reason, HasSubstr("errors name the call site"));
  EXPECT_FALSE(p.reserve_class_name_in_scope.value);
  EXPECT_THAT(p.reserve_class_name_in_scope.reason, HasSubstr("Default/net/fc1"));
  EXPECT_EQ(p.max_call_depth.value, 80);
  EXPECT_EQ(p.max_call_depth.reason, "max_call_depth=80");
  EXPECT_EQ(p.print_file_path.value, "print.pb");
  EXPECT_TRUE(p.infer_boost.value);
}

// Layouts at every jit_level and op by op, both turned off by disable_format_transform.
TEST_F(ContextTest, FormatTransformAndEagerChannelsLast) {
  for (const char* level : {"O0", "O1", "O2"}) {
    const Policy on = policy_with({{"mode", 0}, {"jit_config.jit_level", level}});
    EXPECT_TRUE(on.format_transform.value) << level;
    EXPECT_TRUE(on.eager_channels_last.value) << level;
    EXPECT_THAT(on.format_transform.reason, HasSubstr("at every jit_level"));
  }
  const Policy off = policy_with({{"disable_format_transform", true}});
  EXPECT_FALSE(off.format_transform.value);
  EXPECT_FALSE(off.eager_channels_last.value);
  EXPECT_THAT(off.eager_channels_last.reason,
              ::testing::StartsWith("disable_format_transform=true: op by op, every tensor is "
                                    "stored NCHW"));
}

TEST_F(ContextTest, KeysWithoutEffectOnCpuAreReported) {
  set_ps_context({{"enable_ssl", true}});
  const Policy p = policy_with({{"op_timeout", 5},
                                {"gpu_config.conv_allow_tf32", false},
                                {"enable_sparse", true},
                                {"max_device_memory", "2GB"}});
  std::vector<std::string> names;
  for (const auto& key : p.ineffective_keys) names.push_back(key.name);
  EXPECT_EQ(names, (std::vector<std::string>{"op_timeout", "gpu_config", "enable_sparse",
                                             "ps_context.enable_ssl"}));
  EXPECT_EQ(p.ineffective_keys[0].value, "5");
  EXPECT_EQ(p.ineffective_keys[0].reason,
            "CPU kernels run on the calling threads and have no device-side watchdog to time out");
  EXPECT_EQ(p.ineffective_keys[2].reason, "deprecated; sparse tensors need no switch");
  EXPECT_EQ(p.ineffective_keys[3].reason,
            "parameter-server training is not available in this build");
}

TEST_F(ContextTest, ExplainListsEveryDecision) {
  const Policy p = policy_with({{"mode", 0}, {"jit_config.jit_level", "O1"}, {"op_timeout", 5}});
  const auto lines = explain(p);
  const auto find = [&](std::string_view name) -> const Explanation* {
    for (const auto& line : lines) {
      if (line.name == name) return &line;
    }
    return nullptr;
  };
  for (const char* name : {"mode",
                           "jit_level",
                           "fusion.opt_level",
                           "dump.level",
                           "dump.dir",
                           "compile_cache",
                           "compile_cache.dir",
                           "threads.intra_op",
                           "threads.inter_op",
                           "memory.max_bytes",
                           "memory.pool_block_bytes",
                           "memory.optimize_level",
                           "memory.reuse",
                           "deterministic",
                           "debug_level",
                           "precompile_only",
                           "pynative_synchronize",
                           "reserve_class_name_in_scope",
                           "max_call_depth",
                           "print_file_path",
                           "ignored.op_timeout"}) {
    const Explanation* line = find(name);
    ASSERT_NE(line, nullptr) << name;
    EXPECT_FALSE(line->reason.empty()) << name;
  }
  EXPECT_EQ(find("mode")->value, "GRAPH_MODE");
  EXPECT_EQ(find("jit_level")->value, "O1");
  EXPECT_EQ(find("fusion.opt_level")->value, "2");
}

TEST(ContextJitLevelTest, ParsesNames) {
  EXPECT_EQ(parse_jit_level("O2"), JitLevel::kO2);
  EXPECT_EQ(to_string(JitLevel::kO1), "O1");
  EXPECT_EQ(error_message([] { parse_jit_level("O3"); }),
            "jit_level 'O3' is not recognized; use O0, O1 or O2");
}

}  // namespace
}  // namespace mf::context

namespace mf::context {
namespace {

// Workers that mf launch starts on one host share its cores: each defaults to its share of the
// intra-op threads, and the reason says why.
TEST_F(ContextTest, LocalWorkersSplitTheCores) {
  const int machine = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  ::setenv("MS_LOCAL_WORKER_NUM", "2", 1);
  const Policy shared = derive_policy(snapshot(), DeriveOptions{});
  ::setenv("MS_LOCAL_WORKER_NUM", "not a number", 1);
  const Policy malformed = derive_policy(snapshot(), DeriveOptions{});
  ::unsetenv("MS_LOCAL_WORKER_NUM");
  const Policy alone = derive_policy(snapshot(), DeriveOptions{});
  EXPECT_EQ(shared.intra_op_threads.value, std::max(1, machine / 2));
  EXPECT_THAT(shared.intra_op_threads.reason, HasSubstr("MS_LOCAL_WORKER_NUM=2"));
  EXPECT_EQ(alone.intra_op_threads.value, machine);
  EXPECT_EQ(malformed.intra_op_threads.value, machine);
}

}  // namespace
}  // namespace mf::context
