#include "context/fingerprint.h"

#include <gtest/gtest.h>

#include "context/key_table.h"
#include "tests/context/context_fixture.h"

namespace mf::context {
namespace {

Fingerprint current(std::optional<JitLevel> network = {}) {
  const Snapshot s = snapshot();
  return fingerprint(s, derive_policy(s, network));
}

TEST_F(ContextTest, FingerprintIsStableAndHex) {
  const Fingerprint a = current();
  const Fingerprint b = current();
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_EQ(a.hex().size(), 16u);
  EXPECT_EQ(a.hex().find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_TRUE(differing_components(a, b).empty());
}

TEST_F(ContextTest, FingerprintCoversEveryCompileRelevantKey) {
  const Fingerprint base = current();
  for (const auto& spec : context_keys()) {
    SCOPED_TRACE(spec.name);
    // env_config_path needs a file (policy_test covers its effect); device_target has one valid
    // value.
    if (spec.name == "env_config_path" || spec.name == "device_target") continue;
    reset();
    set({{spec.name, spec.example}});
    const Fingerprint changed = current();
    if (spec.compile_relevant) {
      EXPECT_NE(changed.hash, base.hash);
      const auto diff = differing_components(base, changed);
      // graph_kernel_flags counts by its meaning, the canonical flags.
      const std::string component =
          spec.name == "graph_kernel_flags" ? "policy.fusion_flags" : spec.name;
      EXPECT_NE(std::find(diff.begin(), diff.end(), component), diff.end());
    } else if (spec.alias_of.empty()) {
      EXPECT_EQ(changed.hash, base.hash) << "not compile-relevant, yet the fingerprint changed";
    }
  }
}

TEST_F(ContextTest, FingerprintCoversCompileRelevantParallelKeys) {
  const Fingerprint base = current();
  for (const auto& spec : auto_parallel_keys()) {
    SCOPED_TRACE(spec.name);
    reset_auto_parallel_context();
    if (spec.name == "global_rank") set_auto_parallel_context({{"device_num", 4}});
    const Fingerprint before = current();
    set_auto_parallel_context({{spec.name, spec.example}});
    if (spec.compile_relevant) {
      EXPECT_NE(current().hash, before.hash);
    } else if (spec.alias_of.empty()) {
      EXPECT_EQ(current().hash, before.hash);
    }
  }
  reset_auto_parallel_context();
  EXPECT_EQ(current().hash, base.hash);
}

TEST_F(ContextTest, FingerprintIgnoresRuntimeOnlyKeys) {
  const Fingerprint base = current();
  set({{"save_graphs_path", "./elsewhere"},
       {"pynative_synchronize", true},
       {"runtime_num_threads", 3},
       {"save_graphs", 3},
       {"op_timeout", 10},
       {"enable_compile_cache", true}});
  EXPECT_EQ(current().hash, base.hash);
}

TEST_F(ContextTest, FingerprintFollowsDerivedDecisions) {
  set({{"mode", 0}});
  const Fingerprint global = current();
  const Fingerprint network = current(JitLevel::kO2);
  EXPECT_NE(global.hash, network.hash);
  const auto diff = differing_components(global, network);
  EXPECT_NE(std::find(diff.begin(), diff.end(), "policy.jit_level"), diff.end());
  EXPECT_NE(std::find(diff.begin(), diff.end(), "policy.fusion_level"), diff.end());
  // Equal decisions reached by different routes give equal derived components.
  set({{"jit_config.jit_level", "O2"}});
  const auto same = differing_components(current(), network);
  EXPECT_EQ(same, (std::vector<std::string>{"jit_config"}));
}

TEST_F(ContextTest, FingerprintComponentsAreReadable) {
  set({{"mode", "GRAPH_MODE"}, {"graph_kernel_flags", "--dump_as_text --opt_level=1"}});
  const Fingerprint print = current();
  std::map<std::string, std::string> parts(print.components.begin(), print.components.end());
  EXPECT_EQ(parts["policy.fusion_level"], "1");
  EXPECT_EQ(parts["policy.fusion_flags"], "--opt_level=1 --dump_as_text");
  // The raw text is not a component: its meaning is (policy.fusion_flags).
  EXPECT_FALSE(parts.contains("graph_kernel_flags"));
  // The mode and the parallel context cannot change a compiled graph: not components.
  EXPECT_FALSE(parts.contains("mode"));
  EXPECT_FALSE(parts.contains("policy.mode"));
  EXPECT_FALSE(parts.contains("auto_parallel_context.device_num"));
}

TEST_F(ContextTest, AnIgnoredUnknownFlagOrAnotherOrderLeavesTheFingerprintAlone) {
  set({{"mode", "GRAPH_MODE"}, {"graph_kernel_flags", "--opt_level=2 --dump_as_text"}});
  const Fingerprint plain = current();
  set({{"graph_kernel_flags", "--dump_as_text --opt_level=2 --no_such_flag=7"}});
  EXPECT_EQ(current().hash, plain.hash);
  set({{"graph_kernel_flags", "--opt_level=3"}});
  EXPECT_NE(current().hash, plain.hash);
}

}  // namespace
}  // namespace mf::context
