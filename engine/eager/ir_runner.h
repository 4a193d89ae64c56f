#pragma once
// Runs an ir::Graph op by op through the dispatcher (PYNATIVE semantics): what `mf run FILE.ir`
// does. Parameters are fed by name; a parameter nobody feeds is filled from the seed (randn for
// floating types, zeros otherwise) and named in the report, so a dumped graph runs as it is.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/graph/driver.h"
#include "engine/graph/graph_mode.h"
#include "engine/tensor.h"
#include "ir/graph.h"

namespace mf::engine {

class IrRunner {
 public:
  explicit IrRunner(std::unique_ptr<ir::Graph> graph);
  ~IrRunner();
  IrRunner(IrRunner&&) noexcept;
  static IrRunner from_file(const std::string& path);

  // Outputs in the graph's output order, each under the name the graph gives it (an ONNX model's
  // output name, `Return(%3 as "logits")`), else "output<i>".
  std::vector<std::pair<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs,
                                                  uint64_t seed);
  // run() op by op through the dispatcher in either mode, so a tape records the ops and a trace
  // follows them (a model run inside a cell's forward: engine/io/model_cell.h).
  std::vector<std::pair<std::string, Tensor>> run_op_by_op(
      const std::map<std::string, Tensor>& inputs, uint64_t seed) {
    return run_eager(bind(inputs, seed));
  }
  // `inputs` with every parameter they leave out made from the seed, as run() makes them: a caller
  // that runs many times makes them once (generating a large input costs as much as a small
  // network).
  std::map<std::string, Tensor> with_generated(const std::map<std::string, Tensor>& inputs,
                                               uint64_t seed) {
    return bind(inputs, seed);
  }
  // Parameters filled from the seed in the last run() or with_generated().
  const std::vector<std::string>& generated_parameters() const { return generated_; }
  const ir::Graph& graph() const { return *graph_; }
  // GRAPH mode: what the last run did (compiled or reused, times, planned peak).
  const GraphRunReport& graph_report() const { return report_; }

  // GRAPH mode: where a compiled form for this runner's graph comes from when it has none for
  // the context's settings. The hook returns one (and fills what the report says of it), or null
  // to compile the graph as usual. A model with dynamic dimensions sets it to bind its one
  // symbolic compile to this runner's sizes.
  using CompileHook = std::function<std::unique_ptr<CompiledNetwork>(
      const context::Policy&, const context::Fingerprint&, const DriverOptions&, GraphRunReport&)>;
  void set_compile_hook(CompileHook hook) { compile_hook_ = std::move(hook); }

  // Op by op: the kernels prepared before the run's first op. The first op-by-op run at a thread
  // count (and determinism) makes every node's oneDNN primitive, and oneDNN's sgemm code, before
  // any op runs, as compiling does for a graph: the time is the run's, shown apart, and no kernel
  // is made in the middle of the network. 0 kernels, 0 ms when they were already made.
  struct EagerPrepareReport {
    size_t kernels = 0;
    double ms = 0;
  };
  const EagerPrepareReport& eager_prepare_report() const { return eager_prepare_; }

 private:
  std::map<std::string, Tensor> bind(const std::map<std::string, Tensor>& inputs, uint64_t seed);
  std::vector<std::pair<std::string, Tensor>> run_eager(
      const std::map<std::string, Tensor>& values);
  // Interprets `graph` op by op; call/cond/while run their subgraphs the same way, `depth` deep.
  std::vector<Tensor> interpret(const ir::Graph& graph, const std::vector<Tensor>& args, int depth,
                                int max_depth);
  std::vector<std::pair<std::string, Tensor>> run_compiled(
      const std::map<std::string, Tensor>& values);
  // Makes every node's primitive for the current intra-op threads, once per (threads,
  // deterministic).
  void prepare_eager_kernels(const std::map<std::string, Tensor>& bound);

  std::unique_ptr<ir::Graph> graph_;
  CompileHook compile_hook_;
  std::vector<std::string> generated_;
  std::vector<std::string> output_names() const;

  std::vector<std::unique_ptr<CompiledNetwork>> compiled_;  // per compile fingerprint
  GraphRunReport report_;
  EagerPrepareReport eager_prepare_;
  // Op by op: each constant of the graph (and its subgraphs) as a tensor, made at its first use.
  std::unordered_map<const ir::Constant*, Tensor> constants_;
  const Tensor& constant_tensor(const ir::Constant* c);  // from constants_, made on first use
  int eager_prepared_threads_ = 0;                       // 0: nothing prepared yet
  bool eager_prepared_deterministic_ = false;
  bool eager_prepared_channels_last_ = false;
};

}  // namespace mf::engine
