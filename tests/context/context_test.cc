#include "context/context.h"

#include <gtest/gtest.h>

#include <spdlog/sinks/ostream_sink.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "base/logging.h"

#include "context/key_table.h"
#include "tests/context/context_fixture.h"

namespace mf::context {
namespace {

using ::testing::HasSubstr;

// A sub-key given as a key of its own is named with its parent.
TEST_F(ContextTest, AMisplacedSubKeyIsNamedWithItsParent) {
  for (const char* key : {"jit_level", "jit_levl"}) {
    try {
      set({{key, "O1"}});
      FAIL() << key << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.message(), HasSubstr("did you mean 'jit_config.jit_level'")) << e.message();
    }
  }
  try {
    get("infer_boost");
    FAIL() << "get(infer_boost) was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("'jit_config.infer_boost'")) << e.message();
  }
}

TEST_F(ContextTest, EveryKeyHasTheDocumentedDefault) {
  const Json expected = {
      {"device_id", 0},
      {"device_target", "CPU"},
      {"max_device_memory", "1024GB"},
      {"variable_memory_max_size", "1024GB"},  // reads max_device_memory
      {"mempool_block_size", "1GB"},
      {"op_timeout", 900},
      {"save_graphs", 0},
      {"save_graphs_path", "."},
      {"enable_dump", false},
      {"save_dump_path", "."},
      {"deterministic", "OFF"},
      {"print_file_path", ""},
      {"env_config_path", ""},
      {"precompile_only", false},
      {"reserve_class_name_in_scope", true},
      {"pynative_synchronize", false},
      {"debug_level", "RELEASE"},
      {"mode", 1},
      {"enable_graph_kernel", false},
      {"graph_kernel_flags", ""},
      {"enable_reduce_precision", true},
      {"aoe_tune_mode", ""},
      {"aoe_config", Json::object()},
      {"check_bprop", false},
      {"max_call_depth", 1000},
      {"grad_for_scalar", false},
      {"enable_compile_cache", false},
      {"compile_cache_path", "."},
      {"inter_op_parallel_num", 0},
      {"runtime_num_threads", 30},
      {"disable_format_transform", false},
      {"support_binary", false},
      {"memory_optimize_level", "O0"},
      {"memory_offload", "OFF"},
      {"ascend_config",
       {{"atomic_clean_policy", 1},
        {"matmul_allow_hf32", false},
        {"conv_allow_hf32", true},
        {"exception_dump", "2"},
        {"host_scheduling_max_threshold", 0}}},
      {"jit_syntax_level", "LAX"},
      {"exec_order", "bfs"},
      {"gpu_config",
       {{"conv_fprop_algo", "normal"},
        {"conv_dgrad_algo", "normal"},
        {"conv_wgrad_algo", "normal"},
        {"conv_allow_tf32", true},
        {"matmul_allow_tf32", false}}},
      {"jit_config", {{"jit_level", ""}, {"infer_boost", "off"}}},
      {"enable_profiling", false},
      {"profiling_options", ""},
      {"enable_sparse", false},
      {"auto_tune_mode", "NO_TUNE"},
  };
  ASSERT_EQ(expected.size(), context_keys().size());
  for (const auto& [key, value] : expected.items()) EXPECT_EQ(get(key), value) << key;
}

TEST_F(ContextTest, EveryKeyAcceptsItsExample) {
  for (const auto& spec : context_keys()) {
    if (spec.name == "env_config_path") continue;  // needs a file: json_file_test.cc
    SCOPED_TRACE(spec.name);
    reset();
    ASSERT_NO_THROW(set({{spec.name, spec.example}}));
    const Json stored = get(spec.name);
    if (spec.type == ValueType::kDict) {
      for (const auto& [sub, value] : spec.example.items()) EXPECT_EQ(stored[sub], value);
    } else if (spec.type == ValueType::kMode) {
      EXPECT_EQ(stored, 0);  // the example is "GRAPH_MODE", stored as its int
    } else if (spec.name == "device_target") {
      EXPECT_EQ(stored, "CPU");  // the example "cpu" is stored in its canonical spelling
    } else {
      EXPECT_EQ(stored, spec.example);
    }
  }
}

TEST_F(ContextTest, ModeAcceptsNumbersAndNamesAndGetsTheInt) {
  set({{"mode", "GRAPH_MODE"}});
  EXPECT_EQ(get("mode"), 0);
  set({{"mode", 1}});
  EXPECT_EQ(get("mode"), 1);
  set({{"mode", 0}});
  EXPECT_EQ(get("mode"), 0);
  set({{"mode", "PYNATIVE_MODE"}});
  EXPECT_EQ(get("mode"), 1);
}

TEST_F(ContextTest, SaveGraphsTrueMeansTwo) {
  set({{"save_graphs", true}});
  EXPECT_EQ(get("save_graphs"), 2);
  set({{"save_graphs", false}});
  EXPECT_EQ(get("save_graphs"), 0);
  set({{"save_graphs", 3}});
  EXPECT_EQ(get("save_graphs"), 3);
}

TEST_F(ContextTest, UnknownKeySuggestsTheClosest) {
  const std::string message = error_message([] { set({{"save_graph", 1}}); });
  EXPECT_THAT(message, HasSubstr("For 'context.set_context', the keyword argument 'save_graph' is "
                                 "not recognized; did you mean 'save_graphs'"));
  EXPECT_THAT(error_message([] { get("mdoe"); }),
              HasSubstr("For 'context.get_context', the keyword argument 'mdoe' is not recognized; "
                        "did you mean 'mode'?"));
  EXPECT_THAT(error_message([] {
                set({{"no_such_key", 1}});
              }),
              HasSubstr("'no_such_key' is not recognized; run `mf context list` to see every key"));
}

TEST_F(ContextTest, SetIsAllOrNothing) {
  const std::uint64_t before = snapshot().version();
  EXPECT_THAT(error_message([] {
                set({{"save_graphs", 2}, {"mode", "GRAPH_MODE"}, {"max_call_depth", 0}});
              }),
              HasSubstr("'max_call_depth'"));
  EXPECT_EQ(get("save_graphs"), 0);
  EXPECT_EQ(get("mode"), 1);
  EXPECT_EQ(snapshot().version(), before);
  error_message([] { set({{"jit_config.jit_level", "O1"}, {"bogus", true}}); });
  EXPECT_EQ(get("jit_config.jit_level"), "");
}

TEST_F(ContextTest, DottedKeysReadAndWriteOneSubKey) {
  set({{"jit_config.infer_boost", "on"}});
  set({{"jit_config.jit_level", "O2"}});
  EXPECT_EQ(get("jit_config"), (Json{{"jit_level", "O2"}, {"infer_boost", "on"}}));
  EXPECT_EQ(get("gpu_config.conv_allow_tf32"), true);
  EXPECT_EQ(get("ascend_config.precision_mode"), nullptr);  // not set by default
  EXPECT_THAT(error_message([] { get("jit_config.jit_levle"); }),
              HasSubstr("'jit_config' has no sub-key 'jit_levle'; did you mean 'jit_level'? (valid "
                        "sub-keys: jit_level, infer_boost)"));
  EXPECT_THAT(error_message([] {
                set({{"mode.level", 1}});
              }),
              HasSubstr("'mode' is a int|str, not a dict, so 'mode.level' names nothing"));
}

TEST_F(ContextTest, AWholeDictReplacesThePreviousOne) {
  set({{"jit_config", {{"infer_boost", "on"}}}});
  set({{"jit_config", {{"jit_level", "O1"}}}});
  EXPECT_EQ(get("jit_config"), (Json{{"jit_level", "O1"}, {"infer_boost", "off"}}));
}

TEST_F(ContextTest, DeprecatedAliasWritesItsReplacement) {
  set({{"variable_memory_max_size", "6GB"}});
  EXPECT_EQ(get("max_device_memory"), "6GB");
  EXPECT_EQ(get("variable_memory_max_size"), "6GB");
  EXPECT_FALSE(snapshot().values().contains("variable_memory_max_size"));
}

TEST_F(ContextTest, DeprecatedKeysWarnOnlyOnce) {
  // Other tests in this process may have warned already, so the count is taken in a fresh process:
  // the "threadsafe" death-test style re-runs this binary for this test alone, and the child exits
  // 0 only when each warning appeared exactly once.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::ostringstream captured;
        auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
        log::logger().sinks().push_back(sink);
        set({{"enable_sparse", true}});
        set({{"enable_sparse", false}});
        set({{"auto_tune_mode", "GA"}});
        set({{"auto_tune_mode", "RL"}});
        log::logger().sinks().pop_back();
        const std::string text = captured.str();
        const auto count = [&](std::string_view needle) {
          int n = 0;
          for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
            ++n;
          return n;
        };
        const int sparse = count("'enable_sparse' is deprecated");
        const int tune =
            count("'auto_tune_mode' is deprecated and will be removed; use 'aoe_tune_mode'");
        std::fprintf(stderr, "warnings: enable_sparse %d, auto_tune_mode %d\n", sparse, tune);
        std::exit(sparse == 1 && tune == 1 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "warnings: enable_sparse 1, auto_tune_mode 1");
}

TEST_F(ContextTest, DeviceTargetOnlyCpu) {
  set({{"device_target", "cpu"}});
  EXPECT_EQ(get("device_target"), "CPU");
  EXPECT_EQ(error_message(
                [] {
                  set({{"device_target", "GPU"}});
                },
                ErrorKind::kUnsupported),
            "For 'context.set_context', device_target 'GPU' is not available in this build: "
            "modeflow runs on CPU only; use device_target='CPU'.");
  error_message([] { set({{"device_target", "Ascend"}}); }, ErrorKind::kUnsupported);
  EXPECT_THAT(error_message([] {
                set({{"device_target", "TPU"}});
              }),
              HasSubstr("must be one of [CPU, GPU, Ascend], but got 'TPU'"));
}

TEST_F(ContextTest, SetNeedsAnObject) {
  EXPECT_THAT(error_message([] {
                set(Json::array({1, 2}));
              }),
              HasSubstr("expected an object of key -> value, but got [1,2]"));
}

TEST_F(ContextTest, ResetRestoresDefaults) {
  set({{"mode", 0}, {"save_graphs", 3}, {"jit_config.jit_level", "O2"}});
  reset();
  EXPECT_EQ(get("mode"), 1);
  EXPECT_EQ(get("save_graphs"), 0);
  EXPECT_EQ(get("jit_config.jit_level"), "");
}

TEST_F(ContextTest, SnapshotsDoNotSeeLaterChanges) {
  const Snapshot before = snapshot();
  set({{"mode", "GRAPH_MODE"}});
  EXPECT_EQ(before.get("mode"), 1);
  EXPECT_EQ(snapshot().get("mode"), 0);
  EXPECT_GT(snapshot().version(), before.version());
}

TEST_F(ContextTest, NestedContextsThroughSet) {
  set({{"auto_parallel_context", {{"device_num", 8}}}, {"auto_parallel_context.global_rank", 3}});
  EXPECT_EQ(get("auto_parallel_context.device_num"), 8);
  EXPECT_EQ(get_auto_parallel_context("global_rank"), 3);
  EXPECT_THAT(
      error_message([] {
        set({{"auto_parallel_context.device_num", 0}});
      }),
      HasSubstr("For 'context.set_auto_parallel_context', the value of 'device_num' must be "
                "an integer in [1, 4096], but got 0."));
}

TEST_F(ContextTest, ConcurrentReadersAndWritersSeeWholeStates) {
  // A writer flips two keys together; readers must never see one without the other.
  std::atomic<bool> stop = false;
  std::atomic<int> torn = 0;
  std::thread writer([&] {
    for (int i = 0; i < 500; ++i) {
      set({{"save_graphs", i % 2 ? 3 : 0}, {"max_call_depth", i % 2 ? 7 : 1000}});
    }
    stop = true;
  });
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!stop) {
        const Snapshot s = snapshot();
        const bool odd = s.get("save_graphs") == 3;
        if (odd != (s.get("max_call_depth") == 7)) ++torn;
      }
    });
  }
  writer.join();
  for (auto& reader : readers) reader.join();
  EXPECT_EQ(torn, 0);
}

}  // namespace
}  // namespace mf::context
