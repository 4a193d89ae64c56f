// conv-epilogue-fusion (opt_level 1): the activation after a float32 convolution, when it is the
// convolution's only user, runs inside the convolution's kernel as a oneDNN eltwise post-op applied
// while each output block is in cache (runtime/ops/conv.cc):
//   relu(conv2d(...))                        -> conv2d(...) {activation: "relu"}
//   clip(conv2d(...), lo, hi), or
//   minimum(maximum(conv2d(...), lo), hi)    -> conv2d(...) {activation: "clip", clip_min: lo,
//                                               clip_max: hi}   (ONNX Clip, ReLU6; lo, hi scalar
//                                               float32 constants, either operand order)
// so the activation is never written and read back as a tensor of its own. Both are exact, so the
// bits are the unfused ops'. With deterministic=OFF it also takes the activations of EfficientNet
// and MobileNetV3, which oneDNN computes in its own math (within a tested bound of ours, not
// bit for bit):
//   mul(conv, sigmoid(conv))                 -> {activation: "silu"}
//   sigmoid(conv)                            -> {activation: "sigmoid"}
//   mul(conv, hardsigmoid(conv))             -> {activation: "hardswish"}
//   hardsigmoid(conv)                        -> {activation: "hardsigmoid"}
// hardsigmoid being PyTorch's, minimum(maximum(add(mul(x, 1/6), 0.5), 0), 1) as ONNX imports it.
// Runs before elementwise-fusion, which would otherwise take the activation into a fused kernel of
// its own (still one pass over the activation).
//
// A residual add is not taken: oneDNN 2.6 runs a convolution with a binary-add post-op on its
// slower jit:avx512_core kernel instead of brgconv (resnet18's 3x3 64->64 on 56x56: 1.10 -> 1.31
// ms, the whole network 22.9 -> 24.0 ms on one thread), and its sum post-op needs the output to be
// written in the residual's own buffer, which the memory planner cannot yet give.
#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
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
// float32 conv2d with no activation whose result (and the maximum's) has no other use, and, with
// deterministic=OFF only, the four library activations above over such a conv2d whose every use
// is inside the activation; replaces the activation's uses by the new node's output. The exact
// ones compute the same values in the same rounding.
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
  // The node producing `v` when it is `op`.
  static ir::Node* producer(const ir::Value& v, std::string_view op) {
    ir::Node* n = v.node();
    return n != nullptr && n->op() == op && n->num_outputs() == 1 ? n : nullptr;
  }

  // PyTorch's hardsigmoid over `x` as ONNX imports it, ending at `end`:
  // minimum(maximum(add(mul(x, 1/6), 0.5), 0), 1). Its nodes, producer first, or empty.
  static std::vector<ir::Node*> hardsigmoid_of(ir::Node& end, ir::Value* x) {
    const auto upper = with_scalar(end, "minimum");
    if (!upper || upper->second != 1.0f) return {};
    ir::Node* max_node = producer(upper->first, "maximum");
    const auto lower = max_node ? with_scalar(*max_node, "maximum") : std::nullopt;
    if (!lower || lower->second != 0.0f) return {};
    ir::Node* add_node = producer(lower->first, "add");
    const auto shift = add_node ? with_scalar(*add_node, "add") : std::nullopt;
    if (!shift || shift->second != 0.5f) return {};
    ir::Node* mul_node = producer(shift->first, "mul");
    const auto scale = mul_node ? with_scalar(*mul_node, "mul") : std::nullopt;
    if (!scale || scale->second != static_cast<float>(1.0 / 6.0)) return {};
    *x = scale->first;
    return {mul_node, add_node, max_node, &end};
  }

  // The library activations (not exact: oneDNN's post-op math), ending at `end`:
  //   mul(c, sigmoid(c))             -> silu         (EfficientNet's SiLU, either order)
  //   sigmoid(c)                     -> sigmoid      (squeeze-excitation's gate)
  //   mul(c, hardsigmoid(c))         -> hardswish    (MobileNetV3, either order)
  //   hardsigmoid(c)                 -> hardsigmoid
  static std::optional<Match> match_library(ir::Node& end) {
    Match m;
    if (end.op() == "sigmoid") {
      m = {end.input(0).node(), {&end}, "sigmoid"};
    } else if (end.op() == "mul" && end.num_inputs() == 2) {
      for (size_t k = 0; k < 2 && m.conv == nullptr; ++k) {
        const ir::Value c = end.input(k);
        ir::Node* gate = end.input(1 - k).node();
        if (gate == nullptr || c.node() == nullptr) continue;
        if (gate->op() == "sigmoid" && gate->input(0) == c) {
          m = {c.node(), {gate, &end}, "silu"};
        } else if (gate->op() == "minimum") {
          ir::Value x;
          std::vector<ir::Node*> members = hardsigmoid_of(*gate, &x);
          if (!members.empty() && x == c) {
            members.push_back(&end);
            m = {c.node(), std::move(members), "hardswish"};
          }
        }
      }
    } else if (end.op() == "minimum") {
      ir::Value x;
      std::vector<ir::Node*> members = hardsigmoid_of(end, &x);
      if (members.empty()) return std::nullopt;
      m = {x.node(), std::move(members), "hardsigmoid"};
    }
    if (!is_float32_conv(m.conv)) return std::nullopt;
    return m;
  }

  // The activation ending at `end` (a relu, or a clip's minimum) over a float32 convolution.
  static std::optional<Match> match(ir::Node& end) {
    Match m;
    if (end.op() == "relu") {
      m = {end.input(0).node(), {&end}, "relu"};
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
    // Every use of the convolution must be inside the activation (silu and hardswish read it
    // twice), and every member but the last used only by the next.
    for (const ir::Use& use : m.conv->uses()) {
      if (std::find(m.members.begin(), m.members.end(), use.user) == m.members.end()) {
        return "the convolution's result is also used elsewhere, so it must be written anyway";
      }
    }
    for (size_t i = 0; i + 1 < m.members.size(); ++i) {
      if (m.members[i]->uses().size() != 1) {
        return "the activation's " + std::string(m.members[i]->op()) + " is also used elsewhere";
      }
    }
    return "";
  }

  bool fuse_in(ir::Graph& graph, fusion::FusionReport& report) {
    // The library activations only where bits may change (deterministic=OFF), and first: a
    // silu's mul before its sigmoid, a hardswish's mul before its hardsigmoid's minimum.
    std::vector<ir::Node*> ends;
    if (!options_.deterministic) {
      for (ir::Node& node : graph.nodes()) {
        if (node.op() == "mul") ends.push_back(&node);
      }
    }
    for (ir::Node& node : graph.nodes()) {
      if (node.op() == "relu" || node.op() == "clip" || node.op() == "minimum" ||
          (!options_.deterministic && node.op() == "sigmoid")) {
        ends.push_back(&node);
      }
    }
    bool changed = false;
    std::unordered_set<const ir::Node*> erased;
    for (ir::Node* end : ends) {
      if (erased.count(end) != 0) continue;
      std::optional<Match> m = match(*end);
      if (!m && !options_.deterministic) m = match_library(*end);
      if (!m) continue;
      if (const std::string reason = refusal(*m); !reason.empty()) {
        report.rejected(
            {graph.name(), fusion::node_name(*end), "into " + fusion::node_name(*m->conv), reason});
        continue;
      }
      for (const ir::Node* n : m->members) erased.insert(n);
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
    const bool exact = m.activation == "relu" || m.activation == "clip";
    record.rule = "convolution epilogue: " + m.activation +
                  (exact ? " as a post-op in the convolution's kernel"
                         : " as oneDNN's post-op, in oneDNN's math (deterministic=OFF; "
                           "deterministic=ON keeps the separate ops and their bits)");
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
