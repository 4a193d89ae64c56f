// Walks every key of the three key tables: a key set away from its default either
// changes something the engine does (the compiled graph or plan of a sample network, or the typed
// options and runtime settings the engine hands down) or prints a warning saying it does nothing
// here; and the compile fingerprint changes exactly for the keys that can change a compiled graph
// or plan. The expectations are written out here by hand, not read from the key table, so a key
// whose table entry and behaviour disagree fails.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "context/fingerprint.h"
#include "context/key_table.h"
#include "engine/engine_state.h"
#include "engine/graph/driver.h"
#include "engine/graph/trace.h"
#include "engine/models/registry.h"
#include "ir/printer.h"
#include "runtime/eager_executor.h"
#include "runtime/memory_pool.h"
#include "tests/context/context_fixture.h"
#include "tests/tools/mf_cli.h"

namespace mf::context {
namespace {

namespace fs = std::filesystem;

// Keys whose value can change the compiled graph or plan of a sample network, with the value that
// shows it. (jit_config.infer_boost and disable_format_transform act only at jit_level O1 and up or
// on weights; tests/engine/infer_boost_test.cc and tests/passes/format_transform_test.cc cover
// them.)
const std::map<std::string, Json> kCompileRelevant = {
    {"reserve_class_name_in_scope", false},  {"enable_graph_kernel", true},
    {"graph_kernel_flags", "--opt_level=3"}, {"memory_optimize_level", "O1"},
    {"jit_config.jit_level", "O1"},
};

// Keys that change what the engine does at run time (not the compiled result), with the value
// that shows it on this machine.
const std::map<std::string, Json> kRunTime = {
    {"max_device_memory", "3.5GB"},
    {"variable_memory_max_size", "6GB"},
    {"mempool_block_size", "2GB"},
    {"save_graphs", 2},
    {"save_graphs_path", "./ir"},
    {"deterministic", "ON"},
    {"print_file_path", "print.txt"},
    {"precompile_only", true},
    {"pynative_synchronize", true},
    {"debug_level", "DEBUG"},
    {"mode", "GRAPH_MODE"},
    {"max_call_depth", 80},
    {"check_bprop", true},
    {"grad_for_scalar", true},
    {"enable_compile_cache", true},
    {"compile_cache_path", "./cache"},
    {"inter_op_parallel_num", 2},
    {"runtime_num_threads", 1},
    {"auto_parallel_context.device_num", 4},
    {"auto_parallel_context.global_rank", 3},
    {"auto_parallel_context.parallel_mode", "data_parallel"},
    {"auto_parallel_context.gradients_mean", true},
    {"auto_parallel_context.all_reduce_fusion_config", Json::array({8, 160})},
};

const std::set<std::string> kLeadOwned = {"jit_config.infer_boost", "disable_format_transform"};

// Everything a key could change, as text: the compiled form of two sample networks, and the typed
// options and runtime settings derived from the context.
struct Observation {
  std::string compiled;
  std::string run;
};

std::string compiled_form(const Policy& policy, std::string_view net) {
  const models::NetSpec& spec = models::find_net(net);
  auto cell = spec.make(0);
  const Tensor x = spec.make_input(0);
  engine::TraceResult trace = engine::Tracer::trace(*cell, x, policy.max_call_depth.value,
                                                    policy.reserve_class_name_in_scope.value);
  engine::DriverOptions options = engine::driver_options(policy, "walk");
  options.compile.dump.level = 0;  // dumps are run-time output, observed below
  const passes::CompiledGraph compiled =
      engine::compile_graph(std::move(trace.graph), options.compile);
  return ir::print_graph(*compiled.graph) + compiled.plan->describe();
}

Observation observe() {
  const Snapshot s = snapshot();
  const Policy policy = derive_policy(s);
  Observation o;
  for (const char* net : {"mlp", "layernorm_ops"}) o.compiled += compiled_form(policy, net);
  const engine::DriverOptions d = engine::driver_options(policy, "walk");
  std::ostringstream run;
  run << "threads " << d.run.intra_op_threads << " inter " << d.run.inter_op_parallelism
      << " deterministic " << d.run.deterministic << " depth " << d.run.max_call_depth
      << " executor " << to_string(d.executor) << " cache " << d.compile_cache << " "
      << policy.compile_cache_dir.value << " precompile " << d.precompile_only << " dump "
      << d.compile.dump.level << " " << d.compile.dump.dir.string() << " verify "
      << d.compile.verify_every_pass << " mode " << to_string(policy.mode.value) << " rdr "
      << policy.rdr.value.enable << " print '" << policy.print_file_path.value << "'"
      << " check_bprop " << policy.check_bprop.value << " grad_for_scalar "
      << policy.grad_for_scalar.value << " parallel " << to_string(policy.parallel_mode.value)
      << " mean " << policy.gradients_mean.value << " splits "
      << policy.all_reduce_fusion_config.value.size();
  // What the engine applied to the runtime when the context changed.
  engine::current_policy();
  run << " sync " << runtime::default_eager_executor().synchronous() << " pool limit "
      << runtime::default_pool().stats().limit_bytes << " block "
      << policy.mempool_block_bytes.value;
  o.run = run.str();
  return o;
}

Fingerprint print() {
  const Snapshot s = snapshot();
  return fingerprint(s, derive_policy(s));
}

// "key" or "auto_parallel_context.key" / "ps_context.key" / "dict.sub" -> the set() argument.
Json change_of(const std::string& key, const Json& value) {
  return Json{{key, value}};
}

class KeyWalkTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    dir_ = fs::temp_directory_path() / ("mf_key_walk_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    previous_ = fs::current_path();
    fs::current_path(dir_);  // relative paths of the examples land here
  }
  void TearDown() override {
    fs::current_path(previous_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
    ContextTest::TearDown();
  }
  fs::path dir_, previous_;
};

// Every key, every table: (name as set() takes it, the value to set).
std::vector<std::pair<std::string, Json>> every_key() {
  std::vector<std::pair<std::string, Json>> out;
  for (const auto& spec : context_keys()) {
    if (spec.name == "jit_config") {
      for (const auto& sub : spec.sub_keys) out.emplace_back("jit_config." + sub.name, sub.example);
    } else {
      out.emplace_back(spec.name, spec.example);
    }
  }
  for (const auto& spec : auto_parallel_keys()) {
    out.emplace_back("auto_parallel_context." + spec.name, spec.example);
  }
  for (const auto& spec : ps_keys()) out.emplace_back("ps_context." + spec.name, spec.example);
  return out;
}

TEST_F(KeyWalkTest, EveryKeyChangesBehaviourOrWarnsAndTheFingerprintFollowsTheCompiledResult) {
  const Observation base = observe();
  const Fingerprint base_print = print();
  int compiled_keys = 0, run_keys = 0, inert_keys = 0;
  for (auto [key, value] : every_key()) {
    SCOPED_TRACE(key);
    if (key == "env_config_path" || key == "device_target") continue;  // own tests below
    if (auto it = kCompileRelevant.find(key); it != kCompileRelevant.end()) value = it->second;
    if (auto it = kRunTime.find(key); it != kRunTime.end()) value = it->second;
    ContextTest::reset_all();
    if (key == "auto_parallel_context.global_rank") set({{"auto_parallel_context.device_num", 4}});
    const Observation before = key == "auto_parallel_context.global_rank" ? observe() : base;
    const Fingerprint before_print = print();
    set(change_of(key, value));
    const Observation after = observe();
    const Fingerprint after_print = print();
    const bool fingerprint_changed = after_print.hash != before_print.hash;
    if (kLeadOwned.contains(key)) {
      const std::string top = key.substr(0, key.find('.'));
      EXPECT_EQ(fingerprint_changed, find_key(context_keys(), top)->compile_relevant);
      continue;
    }
    if (kCompileRelevant.contains(key)) {
      ++compiled_keys;
      EXPECT_NE(after.compiled, before.compiled)
          << "compile-relevant, yet nothing compiled differs";
      EXPECT_TRUE(fingerprint_changed);
    } else if (kRunTime.contains(key)) {
      ++run_keys;
      EXPECT_EQ(after.compiled, before.compiled);
      EXPECT_NE(after.run, before.run) << "no run-time setting changed";
      EXPECT_FALSE(fingerprint_changed) << "the compiled result cannot differ, yet the "
                                           "fingerprint changed";
    } else {
      ++inert_keys;
      EXPECT_EQ(after.compiled, before.compiled);
      EXPECT_EQ(after.run, before.run) << "listed as inert, yet something changed";
      EXPECT_FALSE(fingerprint_changed);
      // The warning, seen by a user of `mf` (one fresh process, so no earlier warning hides it).
      const fs::path file = dir_ / "walk.json";
      const std::size_t dot = key.find('.');
      const bool nested =
          key.starts_with("auto_parallel_context.") || key.starts_with("ps_context.");
      Json doc =
          nested ? Json{{key.substr(0, dot), {{key.substr(dot + 1), value}}}} : Json{{key, value}};
      std::ofstream(file) << doc.dump();
      const testing::MfRun run = testing::run_mf("context explain --context " + file.string());
      EXPECT_EQ(run.code, 0) << run.err;
      const std::string name = nested ? key.substr(dot + 1) : key;
      EXPECT_NE(run.err.find("'" + name + "'"), std::string::npos) << run.err;
      EXPECT_TRUE(run.err.find("has no effect here") != std::string::npos ||
                  run.err.find("deprecated") != std::string::npos)
          << run.err;
    }
  }
  // Every list above is used: a key that disappears from the tables is a failure, not a skip.
  EXPECT_EQ(compiled_keys, static_cast<int>(kCompileRelevant.size()));
  EXPECT_EQ(run_keys, static_cast<int>(kRunTime.size()));
  EXPECT_GE(inert_keys, 37);  // the data-parallel keys (parallel_mode, ...) now have effect
}

TEST_F(KeyWalkTest, EnvConfigFileChangesThePlanOnlyAtMemoryLevelO1AndTurnsOnTheRecorder) {
  std::ofstream(dir_ / "env.json")
      << R"({"rdr": {"enable": true, "mode": 1, "path": "/tmp/mf_key_walk_rdr"}, "sys": {"mem_Reuse": false}})";
  const Observation base = observe();
  const Fingerprint base_print = print();
  set({{"env_config_path", (dir_ / "env.json").string()}});
  EXPECT_NE(observe().run, base.run);  // the recorder is on
  EXPECT_EQ(observe().compiled, base.compiled);
  EXPECT_EQ(print().hash, base_print.hash) << "mem_Reuse changes nothing at O0";
  set({{"memory_optimize_level", "O1"}});
  const Observation no_reuse = observe();
  const Fingerprint no_reuse_print = print();
  set({{"env_config_path", ""}});
  EXPECT_NE(observe().compiled, no_reuse.compiled);
  EXPECT_NE(print().hash, no_reuse_print.hash);
}

TEST_F(KeyWalkTest, DeviceTargetHasOneValidValueAndRejectsTheOthers) {
  const Fingerprint base_print = print();
  set({{"device_target", "cpu"}});
  EXPECT_EQ(get("device_target"), "CPU");
  EXPECT_EQ(print().hash, base_print.hash);
  EXPECT_THAT(error_message(
                  [] {
                    set({{"device_target", "GPU"}});
                  },
                  ErrorKind::kUnsupported),
              ::testing::HasSubstr("GPU"));
}

}  // namespace
}  // namespace mf::context
