#pragma once
// A cell run as a compiled graph: the top-level call of a cell in GRAPH mode, and a jit-compiled
// cell or function (a JitConfig, set_jit, mf::jit) called in PYNATIVE mode. The first call per
// (input type, compile fingerprint) traces the cell and hands the trace to the driver
// (engine/graph/driver.h: cache, passes, executor); later calls run the compiled form. A new
// signature recompiles and the log says why. In PYNATIVE mode the run is one task of the eager
// queue, so ordering, asynchrony and error reporting hold across the boundary with eager code, and
// tensors cross it without copies.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "context/fingerprint.h"
#include "context/policy.h"
#include "engine/graph/driver.h"
#include "engine/graph/trace.h"
#include "engine/tensor.h"

namespace mf::nn {
class Cell;
}

namespace mf::engine {

// What the last compiled call of a cell did, for `mf run` and tests.
struct GraphRunReport {
  bool compiled = false;  // false: reused a compiled form held by the cell
  // Dynamic dimensions: this size was bound to the one symbolic compile (no pass ran), and what
  // the symbolic compile says ("one compile serves every size" or why each size compiles).
  bool specialized = false;
  std::string dynamic_note;
  size_t prepared_shapes = 0;    // concrete signatures the cell holds compiled (dynamic input)
  std::string recompile_reason;  // why a held form did not apply (empty on the first compile)
  double trace_ms = 0, compile_ms = 0, run_ms = 0;
  size_t planned_peak_bytes = 0;
  size_t prepared_kernels = 0;  // oneDNN primitives created at compile time
  // infer_boost=on: bytes of weights compiled in as constants (0: weights bound at every run).
  size_t frozen_weight_bytes = 0;
  std::string memory_regime;  // "pooled, freed after last use" / "planned arena"
  std::string executor;       // "KernelExecutor" / "SinkExecutor"
  std::string jit_level;      // "O1"
  int fusion_level = 0;       // graph-kernel opt_level
  bool jit_region = false;    // a jit-compiled part of a PYNATIVE_MODE run
  // false under precompile_only. In PYNATIVE mode the run is queued: true once submitted, and
  // run_ms is 0 unless pynative_synchronize made it run before the call returned.
  bool ran = false;
  std::vector<std::filesystem::path> dump_files;
  // enable_compile_cache: whether the compile phase loaded from disk, the key, and what happened
  // ("loaded, ...", "stored in DIR; nearest entry ... differs in: ..."). Empty key: cache off.
  bool cache_hit = false;
  std::string cache_key;
  std::string cache_note;
};

// Fills what `report` says of `network` under `policy`: executor, levels and plan always; with
// `just_compiled` also the compile (time, dumps, cache). Called again after a first run, which
// may have replaced a cache hit by a compile (CompiledNetwork::recovery).
void describe_network(const CompiledNetwork& network, const context::Policy& policy,
                      bool just_compiled, GraphRunReport& report);

// The policy a cell's compiled call ran under, with its compile fingerprint. Deriving them writes
// every decision's explanation and walks the key table; a call reuses them while the context's
// version, the mode and the network's own jit level are the ones they were derived from.
struct DerivedPolicy {
  std::uint64_t context_version = 0;
  std::optional<context::JitLevel> network_jit_level;
  context::Policy policy;
  context::Fingerprint fingerprint;
};

// `held` when it still applies (same context version, mode and network jit level), else a new
// derivation stored there.
std::shared_ptr<const DerivedPolicy> derive_policy(
    std::shared_ptr<const DerivedPolicy>& held, std::optional<context::JitLevel> network_jit_level,
    bool jit_region);

// One compiled form of a cell: the driver's compiled network plus how its parameters are bound.
struct CompiledCell {
  ir::TensorType input_type;
  std::vector<Binding> bindings;
  WeightTypes weight_types;
  double trace_ms = 0;
  // Shared with queued PYNATIVE runs, which must survive clear_compiled() and the cell itself.
  std::shared_ptr<CompiledNetwork> network;
};

// The compiled forms a cell holds in memory (the persistent, on-disk store is CompileCache).
class CompiledForms {
 public:
  std::vector<std::unique_ptr<CompiledCell>> entries;
  GraphRunReport last_report;
  std::shared_ptr<const DerivedPolicy> derived;  // from the last call
  // The entry the last call ran and the derivation it was matched under: while both hold, a call
  // with the same input type runs it without comparing fingerprints again.
  CompiledCell* last_entry = nullptr;
  std::shared_ptr<const DerivedPolicy> last_entry_derived;  // held: no address reuse
  // A declared dynamic input (Cell::set_inputs): one symbolic compile per compile fingerprint,
  // with the bindings of its trace; each size is a form bound from it, the most recent
  // kDynamicForms kept.
  struct Symbolic {
    context::Fingerprint fingerprint;
    SymbolicCompile compile;
    std::vector<Binding> bindings;
    double trace_ms = 0;
  };
  std::vector<Symbolic> symbolic;
  static constexpr size_t kDynamicForms = size_t(context::kDynamicFormsKept);

  // Drops every compiled form and what points at them.
  void clear() {
    entries.clear();
    symbolic.clear();
    last_entry = nullptr;
    last_entry_derived.reset();
  }
};

// Runs `cell` on x as a compiled graph: in GRAPH mode now, on this thread; in PYNATIVE mode (a jit
// region) as one task of the eager queue, whose error names the failing node and `where`, the
// jit call site. Returns an undefined tensor under precompile_only.
Tensor run_compiled_cell(nn::Cell& cell, const Tensor& x, CompiledForms& forms,
                         std::optional<context::JitLevel> network_jit_level,
                         std::source_location where = std::source_location::current());

}  // namespace mf::engine
