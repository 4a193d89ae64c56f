#include "context/parallel_context.h"

#include <gtest/gtest.h>

#include "context/key_table.h"
#include "tests/context/context_fixture.h"

namespace mf::context {
namespace {

using ::testing::HasSubstr;

TEST_F(ContextTest, AutoParallelDefaults) {
  const Json expected = {
      {"device_num", 1},
      {"global_rank", 0},
      {"gradients_mean", false},
      {"gradient_fp32_sync", true},
      {"loss_repeated_mean", true},
      {"parallel_mode", "stand_alone"},
      {"search_mode", "dynamic_programming"},
      {"auto_parallel_search_mode", "dynamic_programming"},
      {"parameter_broadcast", false},
      {"strategy_ckpt_load_file", ""},
      {"strategy_ckpt_save_file", ""},
      {"full_batch", false},
      {"dataset_strategy", "data_parallel"},
      {"enable_parallel_optimizer", false},
      {"all_reduce_fusion_config", Json::array()},
      {"pipeline_stages", 1},
      {"grad_accumulation_step", 1},
      {"parallel_optimizer_config",
       {{"gradient_accumulation_shard", true}, {"parallel_optimizer_threshold", 64}}},
      {"comm_fusion", Json::object()}};
  ASSERT_EQ(expected.size(), auto_parallel_keys().size());
  for (const auto& [key, value] : expected.items()) {
    EXPECT_EQ(get_auto_parallel_context(key), value) << key;
  }
}

TEST_F(ContextTest, AutoParallelAcceptsEveryExample) {
  for (const auto& spec : auto_parallel_keys()) {
    SCOPED_TRACE(spec.name);
    reset_auto_parallel_context();
    ASSERT_NO_THROW(set_auto_parallel_context({{spec.name, spec.example}}));
    if (spec.type == ValueType::kDict) {
      EXPECT_EQ(get_auto_parallel_context(spec.name)[spec.example.begin().key()],
                spec.example.begin().value());
    } else {
      EXPECT_EQ(get_auto_parallel_context(spec.name), spec.example);
    }
  }
}

TEST_F(ContextTest, AutoParallelValidation) {
  EXPECT_EQ(error_message([] {
              set_auto_parallel_context({{"device_num", 5000}});
            }),
            "For 'context.set_auto_parallel_context', the value of 'device_num' must be an integer "
            "in [1, 4096], but got 5000.");
  EXPECT_THAT(error_message([] {
                set_auto_parallel_context({{"parallel_mode", "model_parallel"}});
              }),
              HasSubstr("one of [stand_alone, data_parallel, hybrid_parallel, semi_auto_parallel, "
                        "auto_parallel], but got 'model_parallel'."));
  EXPECT_THAT(error_message([] {
                set_auto_parallel_context({{"all_reduce_fusion_config", {160, 8}}});
              }),
              HasSubstr("a list of non-negative, ascending integers"));
  EXPECT_THAT(error_message([] {
                set_auto_parallel_context({{"dataset_strategy", {{1, 0}}}});
              }),
              HasSubstr("\"data_parallel\", \"full_batch\" or a list of lists of positive ints"));
  EXPECT_THAT(error_message([] {
                set_auto_parallel_context({{"pipeline_stages", 0}});
              }),
              HasSubstr("an integer >= 1"));
  EXPECT_THAT(
      error_message([] {
        set_auto_parallel_context(
            {{"comm_fusion", {{"allreduce", {{"mode", "size"}, {"config", 0}}}}}});
      }),
      HasSubstr(
          "'comm_fusion' is invalid: 'allreduce' in mode \"size\" needs a \"config\" above 0"));
  EXPECT_THAT(error_message([] {
                set_auto_parallel_context(
                    {{"comm_fusion", {{"allgather", {{"mode", "index"}, {"config", {1}}}}}}});
              }),
              HasSubstr("mode \"index\" applies to allreduce only"));
  EXPECT_THAT(error_message([] {
                set_auto_parallel_context({{"parallel_optimizer_config", {{"shard", true}}}});
              }),
              HasSubstr("'parallel_optimizer_config' has no sub-key 'shard'"));
  EXPECT_THAT(
      error_message([] {
        set_auto_parallel_context({{"device_nums", 2}});
      }),
      HasSubstr("For 'context.set_auto_parallel_context', the keyword argument 'device_nums' "
                "is not recognized; did you mean 'device_num'?"));
  EXPECT_THAT(error_message([] { get_auto_parallel_context("rank"); }),
              HasSubstr("For 'context.get_auto_parallel_context', the keyword argument 'rank'"));
}

TEST_F(ContextTest, AutoParallelIsAllOrNothingAndResets) {
  error_message([] { set_auto_parallel_context({{"device_num", 8}, {"global_rank", -1}}); });
  EXPECT_EQ(get_auto_parallel_context("device_num"), 1);
  set_auto_parallel_context({{"device_num", 8}, {"parallel_mode", "DATA_PARALLEL"}});
  EXPECT_EQ(get_auto_parallel_context("parallel_mode"), "data_parallel");
  reset_auto_parallel_context();
  EXPECT_EQ(get_auto_parallel_context("device_num"), 1);
  EXPECT_EQ(get_auto_parallel_context("parallel_mode"), "stand_alone");
}

TEST_F(ContextTest, OldSearchModeNameSetsSearchMode) {
  set_auto_parallel_context({{"auto_parallel_search_mode", "recursive_programming"}});
  EXPECT_EQ(get_auto_parallel_context("search_mode"), "recursive_programming");
}

TEST_F(ContextTest, PsContext) {
  EXPECT_EQ(get_ps_context("enable_ps"), false);
  EXPECT_EQ(get_ps_context("scheduler_manage_port"), 11202);
  EXPECT_EQ(get_ps_context("config_file_path"), "");
  EXPECT_EQ(error_message(
                [] {
                  set_ps_context({{"enable_ps", true}});
                },
                ErrorKind::kUnsupported),
            "For 'context.set_ps_context', enable_ps=True is not supported: parameter-server "
            "training is not available in this build.");
  set_ps_context({{"enable_ssl", true}, {"scheduler_manage_port", 12000}});
  EXPECT_EQ(get_ps_context("scheduler_manage_port"), 12000);
  EXPECT_THAT(error_message([] {
                set_ps_context({{"scheduler_manage_port", 70000}});
              }),
              HasSubstr("an integer in [1, 65535]"));
  EXPECT_THAT(error_message([] {
                set_ps_context({{"enable_pss", true}});
              }),
              HasSubstr("For 'context.set_ps_context', the keyword argument 'enable_pss' is not "
                        "recognized; did you mean 'enable_ps' or 'enable_ssl'?"));
  reset_ps_context();
  EXPECT_EQ(get_ps_context("enable_ssl"), false);
}

}  // namespace
}  // namespace mf::context
