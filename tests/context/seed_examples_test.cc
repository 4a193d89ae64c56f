// The examples of the seed documents (../shared/seeds/: every `>>>` line of context.r1.x.en.txt and
// the code examples of the newest set_context.zh.rst), each done through the C++ API with the
// documented result: the value set, or the exception this CPU-only build documents instead.

#include <filesystem>
#include <fstream>

#include "context/key_table.h"
#include "tests/context/context_fixture.h"

namespace mf::context {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class SeedExamplesTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    dir_ = fs::temp_directory_path() / ("mf_seed_examples_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    previous_ = fs::current_path();
    fs::current_path(dir_);  // the examples' relative paths land here
  }
  void TearDown() override {
    fs::current_path(previous_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
    ContextTest::TearDown();
  }
  fs::path dir_, previous_;
};

// set_context.zh.rst: mindspore.set_context(graph_kernel_flags="--opt_level=2 --dump_as_text") and
// mindspore.set_context(env_config_path="./mindspore_config.json").
TEST_F(SeedExamplesTest, NewestPageExamples) {
  set({{"graph_kernel_flags", "--opt_level=2 --dump_as_text"}});
  EXPECT_EQ(get("graph_kernel_flags"), "--opt_level=2 --dump_as_text");
  std::ofstream("mindspore_config.json")
      << R"({"rdr": {"enable": true, "mode": 1, "path": ")" << (dir_ / "rdr").string() << R"("}})";
  set({{"env_config_path", "./mindspore_config.json"}});
  EXPECT_EQ(get("env_config_path"), "./mindspore_config.json");
  EXPECT_TRUE(snapshot().env_config()["rdr"]["enable"].get<bool>());
}

// context.r1.x.en.txt, get_auto_parallel_context / get_context / get_ps_context.
TEST_F(SeedExamplesTest, GetExamplesGiveTheDefaults) {
  EXPECT_EQ(get_auto_parallel_context("parallel_mode"), "stand_alone");
  EXPECT_EQ(get_auto_parallel_context("dataset_strategy"), "data_parallel");
  EXPECT_EQ(get("device_target"), "CPU");
  EXPECT_EQ(get("device_id"), 0);
  EXPECT_EQ(get_ps_context("enable_ps"), false);
}

// context.r1.x.en.txt, set_auto_parallel_context: every line in order, each value stored.
TEST_F(SeedExamplesTest, SetAutoParallelContextExamples) {
  const std::vector<std::pair<Json, std::pair<std::string, Json>>> lines = {
      {{{"device_num", 8}}, {"device_num", 8}},
      {{{"global_rank", 0}}, {"global_rank", 0}},
      {{{"gradients_mean", true}}, {"gradients_mean", true}},
      {{{"gradient_fp32_sync", false}}, {"gradient_fp32_sync", false}},
      {{{"parallel_mode", "auto_parallel"}}, {"parallel_mode", "auto_parallel"}},
      {{{"search_mode", "dynamic_programming"}}, {"search_mode", "dynamic_programming"}},
      {{{"auto_parallel_search_mode", "dynamic_programming"}},
       {"search_mode", "dynamic_programming"}},
      {{{"parameter_broadcast", false}}, {"parameter_broadcast", false}},
      {{{"strategy_ckpt_load_file", "./strategy_stage1.ckpt"}},
       {"strategy_ckpt_load_file", "./strategy_stage1.ckpt"}},
      {{{"strategy_ckpt_save_file", "./strategy_stage1.ckpt"}},
       {"strategy_ckpt_save_file", "./strategy_stage1.ckpt"}},
      {{{"dataset_strategy", Json::array({Json::array({1, 8}), Json::array({1, 8})})}},
       {"dataset_strategy", Json::array({Json::array({1, 8}), Json::array({1, 8})})}},
      {{{"enable_parallel_optimizer", false}}, {"enable_parallel_optimizer", false}},
      {{{"all_reduce_fusion_config", Json::array({8, 160})}},
       {"all_reduce_fusion_config", Json::array({8, 160})}},
      {{{"pipeline_stages", 2}}, {"pipeline_stages", 2}},
      {{{"parallel_optimizer_config", {{"gradient_accumulation_shard", true}}},
        {"enable_parallel_optimizer", true}},
       {"enable_parallel_optimizer", true}},
      {{{"comm_fusion", {{"allreduce", {{"mode", "size"}, {"config", 32}}}}}},
       {"comm_fusion", {{"allreduce", {{"mode", "size"}, {"config", 32}}}}}},
  };
  for (const auto& [call, expected] : lines) {
    SCOPED_TRACE(call.dump());
    set_auto_parallel_context(call);
    EXPECT_EQ(get_auto_parallel_context(expected.first), expected.second);
  }
  EXPECT_EQ(get_auto_parallel_context("parallel_optimizer_config.gradient_accumulation_shard"),
            true);
}

// context.r1.x.en.txt, set_context: every line in order.
TEST_F(SeedExamplesTest, SetContextExamples) {
  std::ofstream("env_config.json") << R"({"sys": {"mem_Reuse": true}})";
  const std::vector<std::pair<Json, std::pair<std::string, Json>>> lines = {
      {{{"mode", 1}}, {"mode", 1}},  // context.PYNATIVE_MODE
      {{{"precompile_only", true}}, {"precompile_only", true}},
      {{{"device_id", 0}}, {"device_id", 0}},
      {{{"save_graphs", true}, {"save_graphs_path", "./model.ms"}}, {"save_graphs", 2}},
      {{{"enable_reduce_precision", true}}, {"enable_reduce_precision", true}},
      {{{"enable_dump", true}, {"save_dump_path", "."}}, {"enable_dump", true}},
      {{{"enable_graph_kernel", true}}, {"enable_graph_kernel", true}},
      {{{"graph_kernel_flags", "--opt_level=2 --dump_as_text"}},
       {"graph_kernel_flags", "--opt_level=2 --dump_as_text"}},
      {{{"reserve_class_name_in_scope", true}}, {"reserve_class_name_in_scope", true}},
      {{{"variable_memory_max_size", "6GB"}}, {"max_device_memory", "6GB"}},
      {{{"enable_profiling", true},
        {"profiling_options", R"({"output":"/home/data/output","training_trace":"on"})"}},
       {"enable_profiling", true}},
      {{{"check_bprop", true}}, {"check_bprop", true}},
      {{{"max_device_memory", "3.5GB"}}, {"max_device_memory", "3.5GB"}},
      {{{"mempool_block_size", "1GB"}}, {"mempool_block_size", "1GB"}},
      {{{"print_file_path", "print.pb"}}, {"print_file_path", "print.pb"}},
      {{{"enable_sparse", true}}, {"enable_sparse", true}},
      {{{"max_call_depth", 80}}, {"max_call_depth", 80}},
      {{{"env_config_path", "./env_config.json"}}, {"env_config_path", "./env_config.json"}},
      {{{"auto_tune_mode", "GA,RL"}}, {"auto_tune_mode", "GA,RL"}},
      {{{"grad_for_scalar", true}}, {"grad_for_scalar", true}},
      {{{"enable_compile_cache", true}, {"compile_cache_path", "./cache.ms"}},
       {"compile_cache_path", "./cache.ms"}},
      {{{"pynative_synchronize", true}}, {"pynative_synchronize", true}},
  };
  for (const auto& [call, expected] : lines) {
    SCOPED_TRACE(call.dump());
    set(call);
    EXPECT_EQ(get(expected.first), expected.second);
  }
  EXPECT_EQ(get("save_graphs_path"), "./model.ms");
  // set_context(device_target="Ascend"): this build runs on CPU only and says so.
  EXPECT_THAT(error_message(
                  [] {
                    set({{"device_target", "Ascend"}});
                  },
                  ErrorKind::kUnsupported),
              HasSubstr("Ascend"));
  EXPECT_EQ(get("device_target"), "CPU");
}

// context.r1.x.en.txt, set_ps_context(enable_ps=True, enable_ssl=True, client_password='123456',
// server_password='123456'): parameter-server training is not in this build, and the whole call
// changes nothing.
TEST_F(SeedExamplesTest, SetPsContextExample) {
  EXPECT_THAT(error_message(
                  [] {
                    set_ps_context({{"enable_ps", true},
                                    {"enable_ssl", true},
                                    {"client_password", "123456"},
                                    {"server_password", "123456"}});
                  },
                  ErrorKind::kUnsupported),
              HasSubstr("enable_ps"));
  EXPECT_EQ(get_ps_context("enable_ssl"), false);
  set_ps_context({{"enable_ssl", true}, {"client_password", "123456"}});
  EXPECT_EQ(get_ps_context("enable_ssl"), true);
}

}  // namespace
}  // namespace mf::context
