// matmul-epilogue-fusion (opt_level 2): a matmul whose only user adds a bias row to it (add with a
// bias of shape (n) or (1, n), either operand order) becomes one matmul_bias node, which adds the
// bias to each block of rows right after computing it, while the block is in cache: the sum is
// never written and read back. Runs before elementwise-fusion, so the bias joins the product even
// where an activation follows: inside a fused kernel the bias row cost a load per tile (the mlp's
// add + relu fused took 18 us against 8 for bias_add and relu apart, 64x512), inside oneDNN's
// matmul next to nothing. Bit-exact: the product is rounded, then the bias added, as the two ops
// do.
//
// A reshape between the two that keeps the product's last axis is seen through (a Linear over a
// 3-D input, as ONNX imports PyTorch's: reshape to (m, k), matmul, reshape back, add the bias):
// add(reshape(matmul(a, b)), bias) -> reshape(matmul_bias(a, b, bias)). The bias still lands on
// the product's columns, and the reshape moves after the kernel (it copies nothing).

#include <optional>
#include <utility>

#include "base/error.h"
#include "passes/fusion/cluster.h"
#include "passes/fusion/fusion_passes.h"
#include "passes/fusion/fusion_report.h"

namespace mf::passes {
namespace {

// Promise: rewrites only add(matmul(a, b), bias) and add(reshape(matmul(a, b)), bias) with the
// reshape keeping the last axis, where the matmul's result (and the reshape's) has no other use,
// and replaces the add's uses by the new node's output (or the new reshape's).
class MatmulEpilogueFusion final : public Pass {
 public:
  explicit MatmulEpilogueFusion(CompileOptions options) : options_(std::move(options)) {}

  std::string_view name() const override { return "matmul-epilogue-fusion"; }

  bool run(ir::Graph& graph) override {
    return fusion::fuse_each_graph(
        graph, name(), options_,
        [this](ir::Graph& g, fusion::FusionReport& report) { return fuse_in(g, report); });
  }

 private:
  struct Match {
    ir::Node* matmul = nullptr;
    ir::Node* reshape = nullptr;  // between the matmul and the add, or null
    ir::Value bias;
  };

  // The matmul under `v`: its producer, or the producer of a reshape that keeps the last axis.
  static std::pair<ir::Node*, ir::Node*> matmul_under(const ir::Value& v) {
    ir::Node* producer = v.node();
    if (producer == nullptr) return {nullptr, nullptr};
    if (producer->op() == "matmul") return {producer, nullptr};
    if (producer->op() != "reshape") return {nullptr, nullptr};
    ir::Node* matmul = producer->input(0).node();
    if (matmul == nullptr || matmul->op() != "matmul") return {nullptr, nullptr};
    const ir::Shape& product = matmul->output_type().shape;
    const ir::Shape& reshaped = producer->output_type().shape;
    if (reshaped.empty() || reshaped.back() != product.back()) return {nullptr, nullptr};
    return {matmul, producer};
  }

  // The matmul and bias of add(matmul, bias) or add(bias, matmul), either possibly through a
  // reshape; the reason when it is none.
  static std::optional<Match> match(ir::Node& add, std::string* reason, std::string* target) {
    for (size_t k = 0; k < 2; ++k) {
      const auto [producer, reshape] = matmul_under(add.input(k));
      if (producer == nullptr) continue;
      const ir::Value bias = add.input(1 - k);
      *target = "into " + fusion::node_name(*producer);
      const ir::TensorType& product = producer->output_type();
      const int64_t n = product.shape[1];
      if (bias.type().dtype != product.dtype ||
          !(bias.type().shape == ir::Shape{n} || bias.type().shape == ir::Shape({1, n}))) {
        *reason = "its other operand " + ir::type_to_string(bias.type()) +
                  " is not one bias value per column of the product";
        return std::nullopt;
      }
      const ir::TensorType& summed = reshape != nullptr ? reshape->output_type() : product;
      if (producer->uses().size() != 1 || (reshape != nullptr && reshape->uses().size() != 1) ||
          add.output_type() != summed) {
        *reason = "the product is also used elsewhere, so it must be written anyway";
        return std::nullopt;
      }
      return Match{producer, reshape, bias};
    }
    return std::nullopt;
  }

  bool fuse_in(ir::Graph& graph, fusion::FusionReport& report) {
    std::vector<ir::Node*> adds;
    for (ir::Node& node : graph.nodes()) {
      if (node.op() == "add") adds.push_back(&node);
    }
    bool changed = false;
    for (ir::Node* add : adds) {
      std::string reason, target;
      const std::optional<Match> m = match(*add, &reason, &target);
      if (!m) {
        if (!reason.empty()) {
          report.rejected({graph.name(), fusion::node_name(*add), target, reason});
        }
        continue;
      }
      const ir::TensorType& product = m->matmul->output_type();
      ir::Node* fused =
          graph.insert_node(add, "matmul_bias", {m->matmul->input(0), m->matmul->input(1), m->bias},
                            m->matmul->attrs(), m->matmul->info());
      fusion::FusedKernelRecord record;
      record.graph = graph.name();
      record.body = fusion::node_name(*fused);
      record.members = {fusion::node_name(*m->matmul), fusion::node_name(*add)};
      if (m->reshape != nullptr) {
        record.members.insert(record.members.begin() + 1, fusion::node_name(*m->reshape));
      }
      record.rule = "matmul epilogue (bias add while each row block is in cache)";
      record.level = 2;
      record.bytes_saved =
          2 * ir::num_elements(product.shape) * static_cast<int64_t>(ir::dtype_size(product.dtype));
      record.kernel = "matmul_bias " + ir::type_to_string(product);
      report.fused(std::move(record));
      ir::Value result = fused->output();
      if (m->reshape != nullptr) {
        result =
            graph.insert_node(add, "reshape", {result}, m->reshape->attrs(), m->reshape->info())
                ->output();
      }
      graph.replace_all_uses(add->output(), result);
      graph.erase_node(add);
      if (m->reshape != nullptr) graph.erase_node(m->reshape);
      graph.erase_node(m->matmul);
      changed = true;
    }
    return changed;
  }

  CompileOptions options_;
};

}  // namespace

std::unique_ptr<Pass> make_matmul_epilogue_fusion(const CompileOptions& options) {
  return std::make_unique<MatmulEpilogueFusion>(options);
}

}  // namespace mf::passes
