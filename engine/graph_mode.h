#pragma once
// GRAPH mode for a cell: trace it once per (input type, compile fingerprint), compile the trace
// through the pass pipeline of its jit level, and run the compiled plan (KernelExecutor for O0/O1,
// SinkExecutor for O2). Compiled forms stay cached on the cell; a new signature recompiles and the
// log says why.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "context/fingerprint.h"
#include "context/policy.h"
#include "engine/tensor.h"
#include "engine/trace.h"
#include "passes/compile_options.h"
#include "passes/compiler.h"
#include "runtime/graph_executor.h"

namespace mf::nn {
class Cell;
}

namespace mf::engine {

// One compiled form of a network.
struct CompiledNetwork {
  ir::TensorType input_type;
  context::Fingerprint fingerprint;
  context::JitLevel jit_level = context::JitLevel::kO0;
  passes::CompiledGraph compiled;
  std::unique_ptr<runtime::GraphExecutor> executor;
  std::vector<Binding> bindings;
  double trace_ms = 0, compile_ms = 0;
  bool cache_hit = false;  // loaded from the persistent compile cache (enable_compile_cache)
  std::string cache_key, cache_note;
};

// What the last GRAPH-mode call of a cell did, for `mf run` and tests.
struct GraphRunReport {
  bool compiled = false;         // false: reused a cached compiled form
  std::string recompile_reason;  // why a cached form did not apply (empty on the first compile)
  double trace_ms = 0, compile_ms = 0, run_ms = 0;
  size_t planned_peak_bytes = 0;
  std::string executor;  // "KernelExecutor" / "SinkExecutor"
  bool ran = false;      // false under precompile_only
  std::vector<std::filesystem::path> dump_files;
  // enable_compile_cache: whether the compile phase loaded from disk, the key, and what happened
  // ("loaded, ...", "stored in DIR; nearest entry ... differs in: ..."). Empty key: cache off.
  bool cache_hit = false;
  std::string cache_key;
  std::string cache_note;
};

// The policy a cell's GRAPH-mode call ran under, with its compile fingerprint. Deriving them writes
// every decision's explanation and walks the key table; a call reuses them while the context's
// version and the network's own jit level are the ones they were derived from.
struct DerivedPolicy {
  std::uint64_t context_version = 0;
  std::optional<context::JitLevel> network_jit_level;
  context::Policy policy;
  context::Fingerprint fingerprint;
};

// The compiled forms a cell holds.
class CompiledCache {
 public:
  std::vector<std::unique_ptr<CompiledNetwork>> entries;
  GraphRunReport last_report;
  std::shared_ptr<const DerivedPolicy> derived;  // from the last call
  // The entry the last call ran and the derivation it was matched under: while both hold, a call
  // with the same input type runs it without comparing fingerprints again.
  CompiledNetwork* last_network = nullptr;
  std::shared_ptr<const DerivedPolicy> last_network_derived;  // held: no address reuse

  // Drops every compiled form and what points at them.
  void clear() {
    entries.clear();
    last_network = nullptr;
    last_network_derived.reset();
  }
};

// Typed compile options from the policy: the one place GRAPH mode turns decisions into options.
passes::CompileOptions compile_options_from(const context::Policy& policy, std::string dump_prefix);

// Runs `cell` on x in GRAPH mode. Returns an undefined tensor under precompile_only.
Tensor run_graph_mode(nn::Cell& cell, const Tensor& x, CompiledCache& cache,
                      std::optional<context::JitLevel> network_jit_level);

}  // namespace mf::engine
