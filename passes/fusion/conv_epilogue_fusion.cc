// conv-epilogue-fusion (opt_level 1): the activation after a float32 convolution, when it is the
// convolution's only user, runs inside the convolution's kernel as a oneDNN eltwise post-op applied
// while each output block is in cache (runtime/ops/conv.cc):
//   relu(conv2d(...))                        -> conv2d(...) {activation: "relu"}
//   clip(conv2d(...), lo, hi), or
//   minimum(maximum(conv2d(...), lo), hi)    -> conv2d(...) {activation: "clip", clip_min: lo,
//                                               clip_max: hi}   (ONNX Clip, ReLU6; lo, hi scalar
//                                               float32 constants, either operand order)
// so the activation is never written and read back as a tensor of its own. Both are exact, so the
// bits are the unfused ops'. Runs before elementwise-fusion, which would otherwise take the
// activation into a fused kernel of its own (still one pass over the activation).
//
// A residual add is not taken: oneDNN 2.6 runs a convolution with a binary-add post-op on its
// slower jit:avx512_core kernel instead of brgconv (resnet18's 3x3 64->64 on 56x56: 1.10 -> 1.31
// ms, the whole network 22.9 -> 24.0 ms on one thread), and its sum post-op needs the output to be
// written in the residual's own buffer, which the memory planner cannot yet give.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "passes/fusion/cluster.h"
#include "passes/fusion/fusion_passes.h"
#include "passes/fusion/fusion_report.h"

namespace mf::passes {
namespace {

bool is_float32_conv(const ir::Node* n) {
  return n != nullptr && n->op() == "conv2d" && n->output_type().dtype == ir::DType::kFloat32;
}

// The value of a float32 constant holding one element, if `v` is one.
std::optional<float> scalar_constant(const ir::Value& v) {
  const ir::Constant* c = v.constant();
  if (c == nullptr || c->type().dtype != ir::DType::kFloat32 || c->data<float>().size() != 1) {
    return std::nullopt;
  }
  return c->data<float>()[0];
}

// `op`(x, constant) or `op`(constant, x) with a scalar constant: {x's producer, the constant}.
std::optional<std::pair<ir::Value, float>> with_scalar(const ir::Node& n, std::string_view op) {
  if (n.op() != op || n.num_inputs() != 2) return std::nullopt;
  for (size_t k = 0; k < 2; ++k) {
    if (const std::optional<float> c = scalar_constant(n.input(1 - k))) {
      return std::pair<ir::Value, float>{n.input(k), *c};
    }
  }
  return std::nullopt;
}

// An activation found after a convolution: the nodes it replaces and the attributes it sets.
struct Match {
  ir::Node* conv = nullptr;
  std::vector<ir::Node*>
      members;  // the activation's own nodes, producer first; the last is its end
  std::string activation;
  double lo = 0, hi = 0;
};

// Promise: rewrites only relu(conv), clip(conv, lo, hi) and minimum(maximum(conv, lo), hi) over a
// float32 conv2d with
// no activation whose result (and the maximum's) has no other use, and replaces the activation's
// uses by the new node's output; the new node computes the same values in the same rounding.
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
  // The activation ending at `end` (a relu, or a clip's minimum) over a float32 convolution.
  static std::optional<Match> match(ir::Node& end) {
    Match m;
    if (end.op() == "relu") {
      m.conv = end.input(0).node();
      m.members = {&end};
      m.activation = "relu";
    } else if (end.op() == "clip") {
      const std::optional<float> lo = scalar_constant(end.input(1));
      const std::optional<float> hi = scalar_constant(end.input(2));
      if (!lo || !hi || *lo > *hi) return std::nullopt;
      m.conv = end.input(0).node();
      m.members = {&end};
      m.activation = "clip";
      m.lo = *lo;
      m.hi = *hi;
    } else if (auto upper = with_scalar(end, "minimum")) {
      ir::Node* max_node = upper->first.node();
      if (max_node == nullptr) return std::nullopt;
      auto lower = with_scalar(*max_node, "maximum");
      if (!lower || lower->second > upper->second) return std::nullopt;
      m.conv = lower->first.node();
      m.members = {max_node, &end};
      m.activation = "clip";
      m.lo = lower->second;
      m.hi = upper->second;
    }
    if (!is_float32_conv(m.conv)) return std::nullopt;
    return m;
  }

  // Why `m` cannot be fused, or "" when it can.
  static std::string refusal(const Match& m) {
    if (ir::attr_string(m.conv->attrs(), "activation", "conv2d") != "none") {
      return "the convolution already ends with an activation";
    }
    if (m.conv->uses().size() != 1) {
      return "the convolution's result is also used elsewhere, so it must be written anyway";
    }
    if (m.members.size() == 2 && m.members[0]->uses().size() != 1) {
      return "the clip's maximum is also used elsewhere";
    }
    return "";
  }

  bool fuse_in(ir::Graph& graph, fusion::FusionReport& report) {
    std::vector<ir::Node*> ends;
    for (ir::Node& node : graph.nodes()) {
      if (node.op() == "relu" || node.op() == "clip" || node.op() == "minimum") {
        ends.push_back(&node);
      }
    }
    bool changed = false;
    for (ir::Node* end : ends) {
      const std::optional<Match> m = match(*end);
      if (!m) continue;
      if (const std::string reason = refusal(*m); !reason.empty()) {
        report.rejected(
            {graph.name(), fusion::node_name(*end), "into " + fusion::node_name(*m->conv), reason});
        continue;
      }
      fuse(graph, *m, report);
      changed = true;
    }
    return changed;
  }

  static void fuse(ir::Graph& graph, const Match& m, fusion::FusionReport& report) {
    ir::Node* end = m.members.back();
    ir::Attrs attrs = m.conv->attrs();
    attrs["activation"] = m.activation;
    attrs["clip_min"] = m.lo;
    attrs["clip_max"] = m.hi;
    std::vector<ir::Value> inputs(m.conv->inputs().begin(), m.conv->inputs().end());
    ir::Node* fused =
        graph.insert_node(end, "conv2d", std::move(inputs), std::move(attrs), m.conv->info());
    const ir::TensorType& y = m.conv->output_type();
    fusion::FusedKernelRecord record;
    record.graph = graph.name();
    record.body = fusion::node_name(*fused);
    record.members = {fusion::node_name(*m.conv)};
    for (const ir::Node* n : m.members) record.members.push_back(fusion::node_name(*n));
    record.rule =
        "convolution epilogue: " + m.activation + " as a post-op in the convolution's kernel";
    record.level = 1;
    // Each activation node no longer writes its tensor and reads its producer's back.
    record.bytes_saved = 2 * static_cast<int64_t>(m.members.size()) * ir::num_elements(y.shape) *
                         static_cast<int64_t>(ir::dtype_size(y.dtype));
    record.kernel = "conv2d " + ir::type_to_string(y) + " + " + m.activation;
    report.fused(std::move(record));
    graph.replace_all_uses(end->output(), fused->output());
    for (auto it = m.members.rbegin(); it != m.members.rend(); ++it) graph.erase_node(*it);
    graph.erase_node(m.conv);
  }

  CompileOptions options_;
};

}  // namespace

std::unique_ptr<Pass> make_conv_epilogue_fusion(const CompileOptions& options) {
  return std::make_unique<ConvEpilogueFusion>(options);
}

}  // namespace mf::passes
