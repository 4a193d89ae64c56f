#pragma once
// mf::value_and_grad / mf::grad: MindSpore's gradient API over cells and functions.
//
// Over a cell, in GRAPH mode the traced graph is differentiated (passes/grad_transform.h) and
// compiled once per input type and settings, forward and backward as one graph, through the same
// driver, passes, dumps and compile cache as any graph; in PYNATIVE mode the cell runs op by op on
// a tape (engine/autodiff/tape.h) and the backward runs op by op. Over a function of several
// tensors the tape serves both modes. Same rules, same summation order: with deterministic=ON both
// modes give the same bits.

#include <functional>
#include <memory>
#include <source_location>
#include <vector>

#include "engine/graph/graph_mode.h"
#include "engine/nn/cell.h"
#include "engine/tensor.h"

namespace mf {

// What a cell's gradient is taken with respect to (MindSpore's grad_position and weights).
struct GradSpec {
  bool input = true;  // the cell's input x (grad_position=0); false: grad_position=None
  std::vector<Tensor> weights =
      {};                   // parameters of the cell, in the order their gradients come back
  bool sens_param = false;  // each call gives the sensitivity (GradOperation's sens_param)
};

struct Gradients {
  Tensor value;                 // the cell's output
  Tensor input;                 // d value / d x; undefined unless GradSpec::input
  std::vector<Tensor> weights;  // one per GradSpec::weights
};

namespace engine {
struct GradForms;
}
namespace ir {
class Graph;
}

class GradFunction {
 public:
  // InvalidArgument for a weight that is not a parameter of `cell` (named by position).
  GradFunction(nn::Cell& cell, GradSpec spec);
  ~GradFunction();
  GradFunction(GradFunction&&) noexcept;
  GradFunction(const GradFunction&) = delete;
  GradFunction& operator=(const GradFunction&) = delete;

  // `sens` seeds the backward when the spec says sens_param (of the output's type); otherwise ones.
  Gradients operator()(const Tensor& x, const Tensor& sens = Tensor(),
                       std::source_location where = std::source_location::current());
  // A call with several inputs (Cell::operator() of a span): the gradient is still that of
  // inputs[0] and the weights; the others are bound per call, as the cell's extra inputs.
  Gradients operator()(std::span<const Tensor> inputs, const Tensor& sens = Tensor(),
                       std::source_location where = std::source_location::current());
  // GRAPH mode: what the last call compiled or reused (as Cell::graph_report); `ran` is false
  // after a call that ran op by op.
  const engine::GraphRunReport& graph_report() const;

  // GRAPH mode: edits each differentiated graph before it is compiled, given the index of its
  // first weight-gradient output (the data-parallel all-reduces go in this way). Setting it drops
  // the forms compiled so far; null removes it.
  using GraphRewrite = std::function<void(ir::Graph& graph, size_t first_weight_output)>;
  void set_graph_rewrite(GraphRewrite rewrite);

 private:
  nn::Cell& cell_;
  GradSpec spec_;
  std::unique_ptr<engine::GradForms> forms_;
};

GradFunction value_and_grad(nn::Cell& cell, GradSpec spec = {});

// A function of several tensors, differentiated by the tape in either mode: its value and the
// gradients with respect to args[positions[i]] and to `weights` (tensors it reads).
using TensorFunction = std::function<Tensor(const std::vector<Tensor>&)>;
struct FunctionGradients {
  Tensor value;
  std::vector<Tensor> inputs;   // one per position
  std::vector<Tensor> weights;  // one per weight
};
FunctionGradients value_and_grad(const TensorFunction& fn, const std::vector<Tensor>& args,
                                 const std::vector<size_t>& positions,
                                 const std::vector<Tensor>& weights = {},
                                 const Tensor& sens = Tensor());

}  // namespace mf
