// constant-folding: evaluates pure nodes whose operands are all constants by running the op's own
// kernel at compile time, so folded and unfolded graphs compute with the same code. The folder
// itself (constant_folding.h) is shared with the ONNX importer.

#include "passes/constant_folding.h"

#include <vector>

#include "base/error.h"
#include "base/logging.h"
#include "passes/passes.h"

namespace mf::passes {

bool foldable(const ir::Node& node, int64_t max_elements) {
  const ir::OpDef* def = node.def();
  if (def == nullptr || !def->kernel || !def->has(ir::Trait::kPure) ||
      def->has(ir::Trait::kSideEffect) || def->has(ir::Trait::kControlFlow)) {
    return false;
  }
  for (const ir::Value& v : node.inputs()) {
    if (v.kind() != ir::ValueKind::kConstant) return false;
  }
  int64_t elements = 0;
  for (const ir::TensorType& type : node.output_types()) {
    elements += ir::num_elements(type.shape);
  }
  return elements <= max_elements;
}

std::vector<ir::Value> fold_node(ir::Graph& graph, ir::Node& node) {
  std::vector<ir::TensorView> inputs;
  for (const ir::Value& v : node.inputs()) {
    // Kernels take non-const views; they never write their inputs.
    inputs.push_back({const_cast<uint8_t*>(v.constant()->bytes().data()), v.type()});
  }
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<ir::TensorView> outputs;
  for (const ir::TensorType& type : node.output_types()) {
    buffers.emplace_back(size_t(ir::num_elements(type.shape)) * ir::dtype_size(type.dtype));
  }
  for (size_t k = 0; k < buffers.size(); ++k) {
    outputs.push_back({buffers[k].data(), node.output_type(k)});
  }
  ir::KernelContext context{inputs, outputs, node.attrs(), node.op(), /*deterministic=*/true};
  node.def()->kernel(context);
  std::vector<ir::Value> folded;
  for (size_t k = 0; k < buffers.size(); ++k) {
    ir::Constant* constant = graph.add_constant(node.output_type(k), std::move(buffers[k]));
    graph.replace_all_uses(node.output(k), constant);
    folded.push_back(constant);
  }
  graph.erase_node(&node);
  return folded;
}

namespace {

// Replaces each foldable node by new constants holding its outputs. Promise: only pure,
// non-control-flow, kernel-backed nodes with uses are folded; outputs larger than max_elements
// and kernels that fail are left for run time (a failing kernel might sit in an untaken branch).
class ConstantFolding final : public Pass {
 public:
  explicit ConstantFolding(int64_t max_elements) : max_elements_(max_elements) {}

  std::string_view name() const override { return "constant-folding"; }

  bool run(ir::Graph& graph) override {
    bool changed = false;
    for_each_graph(graph, [&](ir::Graph& g) {
      std::vector<ir::Node*> order;
      for (ir::Node& node : g.nodes()) order.push_back(&node);
      for (ir::Node* node : order) {
        if (node->has_uses() && foldable(*node, max_elements_) && fold(g, *node)) changed = true;
      }
    });
    return changed;
  }

 private:
  static bool fold(ir::Graph& graph, ir::Node& node) {
    try {
      fold_node(graph, node);
    } catch (const Error& e) {
      log::debug("constant-folding: leaving {} (op '{}') for run time: {}", node.id(), node.op(),
                 e.message());
      return false;
    }
    return true;
  }

  int64_t max_elements_;
};

}  // namespace

std::unique_ptr<Pass> make_constant_folding(int64_t max_elements) {
  return std::make_unique<ConstantFolding>(max_elements);
}

}  // namespace mf::passes
