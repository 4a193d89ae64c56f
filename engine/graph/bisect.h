#pragma once
// `mf bisect`: find the first compile pass after which a network's GRAPH-mode output leaves its
// PYNATIVE reference. The network runs op by op once (the reference), is traced once, and is then
// compiled and run with the pass pipeline cut after 0, 1, 2, ... pass runs
// (passes::CompileOptions::stop_after_pass); select-kernels and memory planning always run, so
// every cut executes. The first cut whose output differs beyond the tolerance names the pass.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "passes/compile_options.h"

namespace mf::nn {
class Cell;
}
namespace mf::models {
struct NetSpec;
}

namespace mf::engine {

// How a GRAPH-mode output compares with the reference, element by element.
struct Comparison {
  bool diverged = false;     // any element beyond the tolerance, a NaN mismatch, or a shape change
  double max_abs_diff = 0;   // over all elements (NaN on both sides counts as equal)
  int64_t worst_index = -1;  // flat (row-major) index of the element with the largest scaled diff
  double reference = 0;      // that element in the reference
  double value = 0;          // and in the GRAPH-mode output
  std::string note;          // "shape (4, 8) vs (4, 9)", "NaN where the reference is 0.25", ...
};

// An element diverges when |value - reference| > tolerance * max(1, |reference|): absolute near
// zero, relative for large values, so one tolerance serves logits and probabilities alike.
Comparison compare_outputs(const Tensor& reference, const Tensor& value, double tolerance);

// One cut of the pipeline: the first `passes_run` pass runs kept.
struct BisectCut {
  size_t passes_run = 0;
  std::string after_pass;  // the last pass kept; "" for the cut that keeps none (trace only)
  Comparison comparison;
  std::string error;  // the cut failed to compile or run (then comparison is unset)
};

// One fused kernel of the fully compiled graph, run unfused: its node becomes a `call` of the same
// body subgraph (executed op by op), everything else stays as compiled.
struct UnfusedCheck {
  std::string kernel;       // "Mlp/%12 fused @fused_0"
  Comparison vs_fused;      // the unfused run against the fully compiled (fused) run
  Comparison vs_reference;  // the unfused run against PYNATIVE
  std::string error;
};

struct BisectOptions {
  double tolerance = 1e-4;
  uint64_t seed = 0;          // weights and input of a sample network
  bool stop_at_first = true;  // false: check every cut even after a divergence
  // Test-only: passes appended to the front end (a deliberately broken rewrite, to show bisect
  // finds it). See passes::CompileOptions::extra_passes.
  std::vector<passes::PassFactory> extra_passes;
  std::function<void(const BisectCut&)> on_cut;  // called as each cut is checked (progress)
};

struct BisectReport {
  std::string network;
  std::string jit_level;  // "O1"
  int fusion_level = 0;
  double tolerance = 0;
  std::vector<std::string> pipeline;       // pass runs of the full pipeline, in order
  std::vector<BisectCut> cuts;             // in order; up to the first divergence by default
  std::optional<size_t> first_divergence;  // index into cuts
  std::optional<size_t> first_error;       // index into cuts of the first cut that failed
  double max_abs_diff = 0;                 // over the cuts that ran
  // Fused kernels of the full pipeline's graph (op `fused`), each re-run unfused. The first whose
  // unfused run differs from the fused one beyond the tolerance is the culprit kernel: its fused
  // evaluation disagrees with running its own body op by op.
  std::vector<std::string> fused_kernels;
  std::vector<UnfusedCheck> unfused;
  std::optional<size_t> first_divergent_kernel;  // index into unfused
};

// Bisects `cell` on x under the current context (mode is switched to PYNATIVE for the reference
// and to GRAPH for the cuts, then restored). Dumps are off for the cuts.
BisectReport bisect(nn::Cell& cell, const Tensor& x, const BisectOptions& options);
// A sample network by spec, built from options.seed.
BisectReport bisect(const models::NetSpec& spec, const BisectOptions& options);

}  // namespace mf::engine
