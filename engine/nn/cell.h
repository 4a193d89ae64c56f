#pragma once
// nn::Cell, MindSpore's building block: a network or layer with named parameters and named child
// cells. Calling a cell enters its scope ("Default/net-Mlp/fc1-Dense"), so every op it issues
// carries the scope in errors, dumps and reports.

#include <deque>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "context/policy.h"
#include "engine/tensor.h"
#include "ir/input_signature.h"

namespace mf::engine {
class CompiledForms;
class GradTape;
struct GraphRunReport;
}  // namespace mf::engine

namespace mf::nn {

// A network's own compile settings; they beat the context's jit_config, as in MindSpore's
// JitConfig.
struct JitConfig {
  std::string jit_level;  // "O0", "O1", "O2" or empty (the context decides)
};

struct JitGradient;

class Cell {
 public:
  explicit Cell(std::string class_name);
  virtual ~Cell();
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  // Runs forward() inside this cell's scope: op by op in PYNATIVE mode; in GRAPH mode the top-level
  // call traces, compiles (once per input signature and settings) and runs the compiled graph. A
  // cell marked for jit (set_jit, set_jit_config) is compiled in PYNATIVE mode too, and its run
  // is queued like one op; `where` is the call site its errors name.
  Tensor operator()(const Tensor& x, std::source_location where = std::source_location::current());
  virtual Tensor forward(const Tensor& x) = 0;

  // A call with several inputs (MindSpore's construct(self, x, y, ...)): inputs[0] is the cell's
  // input as above, and forward() reads the others through extra_inputs() while this call runs.
  // In GRAPH mode (and jit) a top-level call binds each as an input of the compiled graph, never
  // as a constant or a weight, and a compiled form serves only the count and types it was traced
  // with. They are not parameters: no listing, gradient of weights or checkpoint holds them.
  Tensor operator()(std::span<const Tensor> inputs,
                    std::source_location where = std::source_location::current());
  // The inputs after the first of the call running now; empty for a one-input call.
  std::span<const Tensor> extra_inputs() const { return extra_inputs_; }
  // Input i + 1 of the running call (extra_inputs()[i]); InvalidArgument when the call has fewer.
  const Tensor& extra_input(size_t i) const;
  // Gives the cell other extra inputs until it goes out of scope (what a several-input call does;
  // a trace swaps in its own stand-ins).
  class ExtraInputsScope {
   public:
    ExtraInputsScope(Cell& cell, std::vector<Tensor> extra);
    ~ExtraInputsScope();
    ExtraInputsScope(const ExtraInputsScope&) = delete;
    ExtraInputsScope& operator=(const ExtraInputsScope&) = delete;

   private:
    Cell& cell_;
    std::vector<Tensor> saved_;
  };

  const std::string& class_name() const { return class_name_; }
  // The name its parent gave it ("fc1"); "net" for a top-level cell.
  const std::string& instance_name() const { return instance_name_; }
  // The path of this cell from the top of the cells that adopted it, each by its last adopter,
  // with a trailing dot ("backbone.fc1."; empty for a cell nobody adopted): what MindSpore puts
  // before a parameter's name once the cell is assigned to another (`net.fc1.weight.name` is
  // "fc1.weight").
  std::string parameter_name_prefix() const;

  // Parameters of this cell and its descendants, in registration order: "fc1.weight", "fc1.bias",
  // ...
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Cell*>> named_children() const;
  // The parameters that take gradients (registered with requires_grad), in the same order: what an
  // optimizer trains.
  std::vector<std::pair<std::string, Tensor>> trainable_params() const;
  // Replaces a parameter's value (same shape and dtype), e.g. with trained weights.
  void set_parameter(const std::string& dotted_name, const Tensor& value);
  // Training mode for this cell and its descendants (MindSpore's set_train): layers whose
  // behaviour differs while training read training().
  void set_train(bool mode = true);
  bool training() const { return training_; }
  // MindSpore's Cell.recompute: when a gradient is taken through this cell, its activations are
  // not kept for the backward but computed again from its input just before the backward needs
  // them (in GRAPH mode copies of its nodes in the differentiated graph, in PYNATIVE the cell's
  // forward run again on the tape). Less memory, one more forward of the cell; the gradients keep
  // their bits. No effect on the cell that is itself differentiated, nor outside a gradient.
  void recompute(bool enable = true);
  bool is_recompute() const { return recompute_; }
  // Marks a parameter as trained or not (MindSpore's Parameter.requires_grad).
  void set_requires_grad(const std::string& dotted_name, bool requires_grad);

  // The cell's own compile settings; they also mark it for jit (MindSpore's
  // `@jit(jit_config=...)` on construct). Throws InvalidArgument for a level other than O0, O1, O2
  // or empty (empty: the context's jit_config decides the level).
  void set_jit_config(const JitConfig& config);
  std::optional<context::JitLevel> jit_level() const { return jit_level_; }
  // Marked for jit: compiled as a graph when called in PYNATIVE mode (in GRAPH mode every call
  // already is). Unmarking keeps the JitConfig level for GRAPH mode.
  void set_jit(bool jit) { jit_ = jit; }
  bool jit() const { return jit_; }
  // The child cell at `path`: an instance name ("encoder"), the scope segment
  // ("encoder-TransformerEncoderLayer") or a dotted/slashed path of either ("encoder.attn",
  // "Default/net-Transformer/encoder-TransformerEncoderLayer"). Null when none matches.
  Cell* find_child(std::string_view path);
  // Every descendant as (dotted path, cell), depth first: what find_child accepts.
  std::vector<std::pair<std::string, Cell*>> named_descendants() const;
  // Declares the input, as MindSpore's Cell.set_inputs: a dimension of size -1 is dynamic
  // (unnamed, or named by its symbol: {{-1, "batch"}, {784}}). Every top-level call is checked
  // against it (rank, dtype, known dimensions: an error names the input and the axis), and in
  // GRAPH mode (and jit) one compile serves every size the declaration allows.
  void set_inputs(ir::SymbolicShape shape, DType dtype = DType::kFloat32);
  // Declares a call of several inputs, in order (MindSpore's set_inputs(x, y, ...)): every call
  // must then have that many, each checked against its declaration, and a symbol names one size
  // across them all ({-1, "batch"} in x and in y). In GRAPH mode one compile serves every size the
  // declarations allow.
  void set_inputs(std::vector<std::pair<ir::SymbolicShape, DType>> inputs);
  const std::optional<ir::InputSignature>& declared_input() const { return declared_input_; }
  // The declarations of the inputs after the first (empty: none declared).
  const std::vector<ir::InputSignature>& declared_extra_inputs() const {
    return declared_extra_inputs_;
  }
  // A custom backward (MindSpore's bprop): when has_bprop(), the gradient of the cell's input is
  // bprop(x, out, dout) in both modes (traced into the differentiated graph in GRAPH mode, run on
  // the tape in PYNATIVE), replacing the backward derived from its ops; its own parameters get no
  // gradient through it.
  virtual bool has_bprop() const { return false; }
  virtual Tensor bprop(const Tensor& x, const Tensor& out, const Tensor& dout);
  // bprop, and under check_bprop its result checked against x: shape, dtype (InvalidArgument with
  // MindSpore's wording).
  Tensor run_bprop(const Tensor& x, const Tensor& out, const Tensor& dout);
  // Unsupported while the running call has extra inputs: bprop returns one gradient, for x.
  void check_bprop_takes_this_call() const;
  // What the last GRAPH-mode call did (compiled or reused, times, executor, dumps).
  const engine::GraphRunReport& graph_report() const;
  // Drops compiled forms (the next GRAPH-mode call compiles again).
  void clear_compiled();

 protected:
  // Returns a reference that stays valid for the cell's life. requires_grad false: a parameter
  // the graph binds by name but no optimizer trains (moving statistics).
  Tensor& register_parameter(std::string name, Tensor value, bool requires_grad = true);

 public:
  // Grows whenever what a trace depends on besides the inputs changes anywhere: set_train changes
  // a cell's mode, recompute marks a cell.
  static uint64_t trace_state_generation();

 protected:
  template <typename C>
  C& register_child(std::string name, std::unique_ptr<C> child) {
    C& ref = *child;
    adopt(std::move(name), std::move(child));
    return ref;
  }
  // Adopts a child that its creator shares (the Python front end, where a Python attribute holds
  // it too); a child already registered under `name` is replaced, as Python rebinds an attribute.
  void adopt_shared(std::string name, std::shared_ptr<Cell> child);
  // True when `target` is a child of this cell or of one of its descendants.
  bool reaches(const Cell* target) const;

 private:
  // Input `index`'s declaration, its sizes and symbols checked (InvalidArgument naming the cell).
  ir::InputSignature checked_declaration(size_t index, ir::SymbolicShape shape, DType dtype) const;
  void adopt(std::string name, std::unique_ptr<Cell> child);
  // Under a tape, a jit cell runs compiled and is recorded as one step (see operator()).
  Tensor run_jit_on_tape(engine::GradTape& tape, const Tensor& x, std::source_location where);
  Tensor run_recompute_on_tape(engine::GradTape& tape, const Tensor& x, std::source_location where);
  // The forward as operator() runs it, minus the tape's special cases.
  Tensor call_forward(const Tensor& x, std::source_location where);
  std::vector<Tensor> jit_gradients(std::span<const Tensor> inputs, const Tensor& dout,
                                    std::source_location where);
  void collect_parameters(const std::string& prefix,
                          std::vector<std::pair<std::string, Tensor>>& out,
                          bool trainable_only) const;
  Cell* owner_of(const std::string& dotted_name, std::string& leaf);

  std::string class_name_;
  std::string instance_name_ = "net";
  // The cell that adopted this one last, under instance_name_; cleared when it drops this cell or
  // is destroyed, so it never dangles.
  Cell* adopter_ = nullptr;
  std::optional<context::JitLevel> jit_level_;
  bool jit_ = false;
  bool training_ = false;
  bool recompute_ = false;
  std::optional<ir::InputSignature> declared_input_;
  std::vector<ir::InputSignature> declared_extra_inputs_;
  std::vector<Tensor> extra_inputs_;
  std::unique_ptr<engine::CompiledForms> compiled_;
  // A jit cell's compiled gradient, for the tape (made at the first backward through it).
  std::unique_ptr<JitGradient> jit_gradient_;
  std::deque<std::pair<std::string, Tensor>> parameters_;  // deque: references stay valid
  std::deque<bool> requires_grad_;                         // one per parameter
  // shared_ptr: a Python front end's cells are shared with their Python objects (adopt_shared).
  std::vector<std::pair<std::string, std::shared_ptr<Cell>>> children_;
};

}  // namespace mf::nn
