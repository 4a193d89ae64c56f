#pragma once
// The grad transform (MindSpore's J / ad::Grad): rewrites a traced graph so that one graph computes
// the forward and the gradients of one of its outputs with respect to chosen parameters, built from
// the ops' backward rules (OpDef::backward) before the pass pipeline runs. CSE, fusion at every
// opt_level, layouts and the memory plan then apply to forward and backward alike: a saved
// activation lives until its last backward use, and its memory is reused after.
//
// The PYNATIVE tape (engine/autodiff/tape.h) applies the same rules in the same order: nodes in
// reverse program order, each node's inputs in order, and a value's gradient contributions summed
// as they arrive, earlier sum first. With deterministic=ON both give the same bits.

#include <cstddef>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"

namespace mf::passes {

// A call of a cell with a custom bprop: the traced bprop, a subgraph beside the cell's body taking
// (x, out, dout, then the call's inputs after x), and how many of the call's last inputs are its
// own captures (unused by the body).
struct CustomBprop {
  std::string graph;
  size_t captures = 0;
};

// The scope of a forward node computed again for the backward (a recomputed cell's activations):
// "Recompute/Default/net-Net/block-Block/...". CSE keeps such copies apart from the forward nodes
// they repeat, or nothing would be recomputed.
std::string recompute_scope(std::string_view forward_scope);
bool is_recomputed(const ir::Node& node);

struct GradRequest {
  std::vector<size_t> wrt;  // graph parameters, by index, whose gradients are wanted
  size_t output = 0;        // the output differentiated (MindSpore's has_aux: the first)
  // True: a parameter named `sens` of the output's type seeds the backward (GradOperation's
  // sens_param); false: ones, MindSpore's sensitivity for an output of any shape.
  bool sens_param = false;
  bool keep_outputs = true;  // the forward outputs first; false: the gradients alone
  // One per wrt entry (or empty: none): true adds a parameter of that entry's type, after the
  // others, from which its gradient sum starts (a cond branch's backward continues the sums the
  // graph around it has begun, in the tape's order).
  std::vector<bool> seeded_wrt;
  // Calls (in the graph or its subgraphs) whose cell's backward is a custom bprop.
  std::unordered_map<const ir::Node*, CustomBprop> custom_bprops;
  // Calls whose cell is recomputed (Cell::recompute): the backward reads copies of their body's
  // nodes placed just before it, so the forward's own activations are freed after their forward
  // use.
  std::unordered_set<const ir::Node*> recompute_calls;
};

// Calls are flattened first (every cell's body copied in place of its call). A cond's backward is a
// cond of its branches' backwards (each branch copied and differentiated, its forward computed
// again inside), taking the predicate, the branch inputs, the output's gradient and the sums begun
// so far; `while` has no gradient. Afterwards the outputs
// are the forward outputs (keep_outputs), then one gradient per request.wrt entry: zeros for a
// parameter the output does not depend on. Backward nodes carry their forward node's scope under
// "Gradients/". InvalidArgument for an op on the path without a rule (naming the op and its scope),
// a non-floating parameter or output asked for a gradient, or an index out of range.
void differentiate(ir::Graph& graph, const GradRequest& request);

}  // namespace mf::passes
