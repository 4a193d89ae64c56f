#pragma once
// Tracing: in GRAPH mode a network call is recorded into an ir::Graph instead of being executed.
// Every op becomes a node; each child cell call becomes a subgraph (named after the cell) and a
// `call` node; cond/while_loop become subgraphs and a `cond`/`while` node. A tensor from outside
// the trace is a cell parameter (a weight parameter of the graph, bound by name at every run), a
// small constant (folded into the graph), or a captured tensor (a parameter bound to that tensor).

#include <functional>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/tensor.h"
#include "ir/graph.h"
#include "passes/grad_transform.h"
#include "runtime/graph_executor.h"

namespace mf::nn {
class Cell;
}

namespace mf::engine {

// How a graph parameter gets its tensor at run time.
struct Binding {
  // kExtraInput: one of the call's inputs after the first (Cell::extra_inputs()).
  enum class Kind { kInput, kWeight, kCaptured, kExtraInput };
  Kind kind = Kind::kInput;
  std::string name;        // the input's or the weight's name
  Tensor captured;         // kCaptured: the tensor itself
  size_t extra_index = 0;  // kExtraInput: its place in extra_inputs()
};

// The tensors `bindings` name for a run of `cell` on `x`, in parameter order: x, captured tensors,
// and the cell's weights looked up by name (so a run sees the weights' current values). Waits for
// PYNATIVE work that produces any of them.
std::vector<runtime::TensorArg> bind_inputs(nn::Cell& cell, const std::vector<Binding>& bindings,
                                            const Tensor& x);
// What a compiled form was traced with besides its first input: the other inputs' count and
// types (a loss cell's labels of another batch size), the weights' types and every cell's training
// and recompute mode (a batch norm traces differently). A form is only valid for those. Beyond
// the other inputs, checking is free while no mode changed anywhere since.
struct WeightTypes {
  std::vector<ir::TensorType> types;
  std::vector<ir::TensorType> extra_inputs;  // checked at every call: they change with each
  std::vector<bool> training;   // the cell's, then its descendants' in named_descendants order
  std::vector<bool> recompute;  // likewise: which cells recompute (a differentiated graph's shape)
  uint64_t checked_generation = 0;
  // Records the types `bindings` bind now.
  void record(nn::Cell& cell, const std::vector<Binding>& bindings);
  bool still_fit(nn::Cell& cell, const std::vector<Binding>& bindings);
};
// A tensor holding what an executor returned (the inverse of binding).
Tensor tensor_of(runtime::TensorArg arg);
// The same tensors without waiting for them: for a run queued behind the PYNATIVE work that
// produces them.
std::vector<Tensor> bound_tensors(nn::Cell& cell, const std::vector<Binding>& bindings,
                                  const Tensor& x);

struct TraceResult {
  std::unique_ptr<ir::Graph> graph;
  std::vector<Binding> bindings;  // one per graph parameter, in order
  // trace_bprop: each call of a cell with a custom bprop, and that bprop's subgraph.
  std::unordered_map<const ir::Node*, passes::CustomBprop> custom_bprops;
  // trace_bprop: each call of a cell marked for recompute.
  std::unordered_set<const ir::Node*> recompute_calls;
};

class Tracer {
 public:
  // Traces cell.forward(x) (x named `input_name`) into a graph named after the cell. Nested cells
  // deeper than max_call_depth fail with "exceeds max_call_depth".
  // With `trace_bprop` (a trace to differentiate), a cell with a custom bprop also has its bprop
  // traced: its call node names that subgraph in bprop_graph (passes/grad_transform.h).
  static TraceResult trace(nn::Cell& cell, const Tensor& x, int max_call_depth,
                           bool reserve_class_name, bool trace_bprop = false);
  // The tracer recording on this thread, or null.
  static Tracer* active();
  // True while a trace on this thread binds `t` to a parameter of the graph (the traced input, a
  // weight, a captured tensor): its buffer holds this call's value only, so reading it (asnumpy)
  // would freeze the first call's values into the compiled graph.
  static bool binds_to_parameter(const Tensor& t);

  std::vector<Tensor> record(std::string_view op, std::span<const Tensor> inputs, ir::Attrs attrs,
                             std::source_location where);
  Tensor call_cell(nn::Cell& cell, const Tensor& x);
  Tensor trace_cond(const Tensor& pred, const std::function<Tensor()>& then_fn,
                    const std::function<Tensor()>& else_fn);
  std::vector<Tensor> trace_while(
      const std::function<Tensor(const std::vector<Tensor>&)>& cond_fn,
      const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& body_fn,
      const std::vector<Tensor>& init);

 private:
  struct Frame {
    ir::Graph* graph;
    std::unordered_map<const TensorImpl*, ir::Value> values;
    std::vector<const TensorImpl*>
        captured;  // outer tensors lifted into parameters, in parameter order
  };

  Tracer(int max_call_depth, bool reserve_class_name, bool trace_bprop)
      : max_call_depth_(max_call_depth), reserve_(reserve_class_name), trace_bprop_(trace_bprop) {}
  // Traces cell.bprop into a subgraph of frame `parent` beside the cell's body `body` (whose
  // captures it sees first); returns its name and the captures it adds (appended to the call).
  std::pair<std::string, std::vector<const TensorImpl*>> trace_bprop(
      nn::Cell& cell, size_t parent, const Tensor& x, const Tensor& y, ir::Graph& body,
      const std::vector<const TensorImpl*>& body_captured);
  bool names_weight(const std::string& name) const;
  ir::Value resolve(const Tensor& t) { return resolve(t.impl(), frames_.size() - 1); }
  ir::Value resolve(const std::shared_ptr<TensorImpl>& impl, size_t frame);
  ir::Value lift(const std::shared_ptr<TensorImpl>& impl, size_t frame);
  Tensor symbolic(const ir::TensorType& type, ir::Value value);
  void push_frame(ir::Graph* graph);
  void check_depth(std::string_view what);
  std::string unique_subgraph_name(std::string base);

  int max_call_depth_;
  bool reserve_;
  bool trace_bprop_;
  std::unique_ptr<ir::Graph> root_;
  std::vector<Frame> frames_;
  std::vector<Binding> bindings_;
  std::unordered_map<const TensorImpl*, std::string> weight_names_;
  std::vector<std::shared_ptr<TensorImpl>> keep_alive_;  // addresses in the maps must not be reused
  std::unordered_map<std::string, int> subgraph_names_;
  std::unordered_map<const ir::Node*, passes::CustomBprop> custom_bprops_;
  std::unordered_set<const ir::Node*> recompute_calls_;
};

}  // namespace mf::engine
