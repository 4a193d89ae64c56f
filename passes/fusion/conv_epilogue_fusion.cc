// conv-epilogue-fusion (opt_level 1): what follows a float32 convolution and only reads its result
// runs inside the convolution's kernel, as oneDNN post-ops applied while each output block is in
// cache (runtime/ops/conv.cc):
//   add(conv2d(...), r)   -> conv2d(..., r) with residual=true   (r of the result's type, either order)
//   relu(conv2d(...))     -> conv2d(...) with activation="relu"  (after the residual, if any)
// so resnet's conv -> add -> relu is one kernel, and the sum and its relu are never written and
// read back. Runs before elementwise-fusion, which would otherwise take the add and relu into a
// fused kernel of their own (still one pass over the activation each). Rounding is the unfused
// ops': the sum of two float32 values, then max with zero.

#include <string>

#include "passes/fusion/cluster.h"
#include "passes/fusion/fusion_passes.h"
#include "passes/fusion/fusion_report.h"

namespace mf::passes {
namespace {

bool is_float32_conv(const ir::Node* n) {
  return n != nullptr && n->op() == "conv2d" && n->output_type().dtype == ir::DType::kFloat32;
}

bool has_residual(const ir::Node& conv) {
  return ir::attr_bool(conv.attrs(), "residual", "conv2d");
}

bool has_activation(const ir::Node& conv) {
  return ir::attr_string(conv.attrs(), "activation", "conv2d") != "none";
}

// Promise: rewrites only add(conv, r) / add(r, conv) and relu(conv) where the float32 conv2d's
// result has no other use (so it need not be written), and replaces the add's or relu's uses by
// the new node's output; the new node computes the same values in the same rounding.
class ConvEpilogueFusion final : public Pass {
 public:
  explicit ConvEpilogueFusion(CompileOptions options) : options_(std::move(options)) {}

  std::string_view name() const override { return "conv-epilogue-fusion"; }

  bool run(ir::Graph& graph) override {
    return fusion::fuse_each_graph(
        graph, name(), options_,
        [this](ir::Graph& g, fusion::FusionReport& report) { return fuse_in(g, report); });
  }

 private:
  // The reason the conv2d feeding `user` cannot take it as its epilogue, or "" when it can.
  static std::string refusal(const ir::Node& conv, const ir::Node& user) {
    if (conv.uses().size() != 1) {
      return "the convolution's result is also used elsewhere, so it must be written anyway";
    }
    if (has_activation(conv)) return "the convolution already ends with an activation";
    if (user.op() == "add" && has_residual(conv)) {
      return "the convolution already adds a residual";
    }
    return "";
  }

  bool fuse_in(ir::Graph& graph, fusion::FusionReport& report) {
    // Adds first, so conv -> add -> relu takes the relu after its residual.
    bool changed = false;
    for (std::string_view op : {"add", "relu"}) {
      std::vector<ir::Node*> users;
      for (ir::Node& node : graph.nodes()) {
        if (node.op() == op) users.push_back(&node);
      }
      for (ir::Node* user : users) changed |= fuse_one(graph, *user, report);
    }
    return changed;
  }

  bool fuse_one(ir::Graph& graph, ir::Node& user, fusion::FusionReport& report) {
    const bool add = user.op() == "add";
    ir::Node* conv = nullptr;
    ir::Value residual;
    for (size_t k = 0; k < (add ? 2u : 1u); ++k) {
      ir::Node* producer = user.input(k).node();
      if (!is_float32_conv(producer)) continue;
      if (add && user.input(1 - k).type() != producer->output_type()) {
        report.rejected({graph.name(), fusion::node_name(user),
                         "into " + fusion::node_name(*producer),
                         "its other operand " + ir::type_to_string(user.input(1 - k).type()) +
                             " is not a tensor of the convolution's type (a broadcast add stays "
                             "an elementwise op)"});
        continue;
      }
      conv = producer;
      if (add) residual = user.input(1 - k);
      break;
    }
    if (conv == nullptr) return false;
    if (const std::string reason = refusal(*conv, user); !reason.empty()) {
      report.rejected(
          {graph.name(), fusion::node_name(user), "into " + fusion::node_name(*conv), reason});
      return false;
    }
    std::vector<ir::Value> inputs(conv->inputs().begin(), conv->inputs().end());
    ir::Attrs attrs = conv->attrs();
    if (add) {
      inputs.push_back(residual);
      attrs["residual"] = true;
    } else {
      attrs["activation"] = std::string("relu");
    }
    ir::Node* fused =
        graph.insert_node(&user, "conv2d", std::move(inputs), std::move(attrs), conv->info());
    const ir::TensorType& y = conv->output_type();
    fusion::FusedKernelRecord record;
    record.graph = graph.name();
    record.body = fusion::node_name(*fused);
    record.members = {fusion::node_name(*conv), fusion::node_name(user)};
    record.rule = add ? "convolution epilogue: residual add (oneDNN binary post-op)"
                      : "convolution epilogue: relu (oneDNN eltwise post-op)";
    record.level = 1;
    record.bytes_saved = 2 * ir::num_elements(y.shape) * static_cast<int64_t>(ir::dtype_size(y.dtype));
    record.kernel = "conv2d " + ir::type_to_string(y) + (add ? " + residual" : " + relu");
    report.fused(std::move(record));
    graph.replace_all_uses(user.output(), fused->output());
    graph.erase_node(&user);
    graph.erase_node(conv);
    return true;
  }

  CompileOptions options_;
};

}  // namespace

std::unique_ptr<Pass> make_conv_epilogue_fusion(const CompileOptions& options) {
  return std::make_unique<ConvEpilogueFusion>(options);
}

}  // namespace mf::passes
