// format-transform (every jit_level; off with disable_format_transform=true): float32
// convolutions and pools run on activations in channels-last order (data_format "NHWC"), and the
// transposes that puts around each of them move down through elementwise ops and concats until
// they meet the next convolution, which takes the channels-last value as it is. A chain of
// convolutions, pools, activations, residual adds and concats thus passes its activations in
// oneDNN's channels-last layout, with one reorder at each edge of the chain instead of two per
// convolution. Inference batch norms between them (pre-activation blocks) move along too. Exact:
// an NCHW and an NHWC convolution run the same
// oneDNN primitive (runtime/ops/conv.cc), and elementwise ops commute with transposes.
//
// Promise: only adds transposes around conv2d / max_pool2d / avg_pool2d in float32, and rewrites
// op(transpose(x)) as transpose(op(x)) for elementwise ops, concat and inference batch_norm; every
// replaced node keeps its output type; replaced nodes are left for dead-code-elimination.

#include <optional>
#include <vector>

#include "ir/op_def.h"
#include "passes/pass.h"
#include "passes/passes.h"

namespace mf::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

const std::vector<int64_t> kToChannelsLast = {0, 2, 3, 1};   // NCHW -> NHWC
const std::vector<int64_t> kToChannelsFirst = {0, 3, 1, 2};  // NHWC -> NCHW

bool is_layout_op(const Node& n) {
  return n.op() == "conv2d" || n.op() == "max_pool2d" || n.op() == "avg_pool2d";
}

// The NHWC value `v` is the transpose of, when v = transpose(x, [0, 3, 1, 2]).
std::optional<Value> channels_last_source(const Value& v) {
  const Node* p = v.node();
  if (p == nullptr || p->op() != "transpose" || v.index() != 0) return std::nullopt;
  if (ir::attr_ints(p->attrs(), "perm", "transpose") != kToChannelsFirst) return std::nullopt;
  return p->input(0);
}

// v transposed by perm. Channels-last a value already is (transpose(x, [0, 3, 1, 2]) of an
// NHWC x that an earlier rewrite left) is x itself: no transpose pair is made, so the pass alone
// (jit_level O0 runs no algebraic simplification) leaves a chain channels-last.
Value transposed(Graph& g, Node* before, Value v, const std::vector<int64_t>& perm) {
  if (perm == kToChannelsLast) {
    if (std::optional<Value> source = channels_last_source(v)) return *source;
  }
  return g.insert_node(before, "transpose", {v}, {{"perm", perm}}, before->info())->output();
}

// conv2d / pool in NCHW -> transpose(op_nhwc(transpose(x))).
bool to_channels_last(Graph& g, Node& n) {
  if (!is_layout_op(n) || n.output_type().dtype != ir::DType::kFloat32) return false;
  if (ir::attr_string(n.attrs(), "data_format", n.op()) != "NCHW") return false;
  std::vector<Value> inputs(n.inputs().begin(), n.inputs().end());
  inputs[0] = transposed(g, &n, inputs[0], kToChannelsLast);
  ir::Attrs attrs = n.attrs();
  attrs["data_format"] = std::string("NHWC");
  Node* nhwc = g.insert_node(&n, n.op(), std::move(inputs), std::move(attrs), n.info());
  g.replace_all_uses(n.output(), transposed(g, &n, nhwc->output(), kToChannelsFirst));
  return true;
}

// A broadcast operand at most per-channel: aligned to rank 4 its H and W are 1 (a scalar, a
// (C, 1, 1) bias). Its channels-last form is tiny, and folded when constant.
std::optional<ir::Shape> per_channel_rank4(const ir::Shape& s) {
  if (s.size() > 4) return std::nullopt;
  ir::Shape rank4(4 - s.size(), 1);
  rank4.insert(rank4.end(), s.begin(), s.end());
  if (rank4[2] != 1 || rank4[3] != 1) return std::nullopt;
  return rank4;
}

// op(transpose(x), ...) -> transpose(op(x, ...)) for a rank-4 elementwise op whose other operands
// are scalars or per-channel broadcasts (reshaped to rank 4 and transposed). A full activation
// of its own stops the move: it would only add a transpose.
bool sink_through_elementwise(Graph& g, Node& n) {
  if (!n.def()->has(ir::Trait::kElementwise) || n.num_outputs() != 1) return false;
  if (n.output_type().shape.size() != 4) return false;
  bool any = false;
  for (const Value& v : n.inputs()) {
    if (channels_last_source(v)) {
      any = true;
    } else if (!per_channel_rank4(v.type().shape)) {
      return false;
    }
  }
  if (!any) return false;
  std::vector<Value> inputs;
  for (const Value& v : n.inputs()) {
    if (std::optional<Value> source = channels_last_source(v)) {
      inputs.push_back(*source);
    } else if (v.type().shape.empty()) {
      inputs.push_back(v);
    } else {
      const ir::Shape rank4 = *per_channel_rank4(v.type().shape);
      const Value r =
          v.type().shape.size() == 4
              ? v
              : g.insert_node(&n, "reshape", {v}, {{"shape", rank4}}, n.info())->output();
      inputs.push_back(transposed(g, &n, r, kToChannelsLast));
    }
  }
  Node* nhwc = g.insert_node(&n, n.op(), std::move(inputs), n.attrs(), n.info());
  g.replace_all_uses(n.output(), transposed(g, &n, nhwc->output(), kToChannelsFirst));
  return true;
}

// concat(transpose(a), transpose(b), ...) along an NCHW axis -> transpose(concat(a, b, ...)).
bool sink_through_concat(Graph& g, Node& n) {
  if (n.op() != "concat" || n.output_type().shape.size() != 4) return false;
  std::vector<Value> inputs;
  for (const Value& v : n.inputs()) {
    std::optional<Value> source = channels_last_source(v);
    if (!source) return false;
    inputs.push_back(*source);
  }
  int64_t axis = ir::attr_int(n.attrs(), "axis", "concat");
  if (axis < 0) axis += 4;
  constexpr int64_t kNhwcAxisOf[] = {0, 3, 1, 2};  // NCHW axis -> its NHWC position
  Node* nhwc =
      g.insert_node(&n, "concat", std::move(inputs), {{"axis", kNhwcAxisOf[axis]}}, n.info());
  g.replace_all_uses(n.output(), transposed(g, &n, nhwc->output(), kToChannelsFirst));
  return true;
}

// batch_norm(transpose(x), scale, bias, mean, var) over rank-4 NCHW -> transpose(batch_norm(x, ...,
// data_format "NHWC")): inference batch norm is per-channel elementwise, and its channels-last
// kernel rounds each element as the NCHW one does (a pre-activation block, as DenseNet's, then
// stays channels-last between its convolutions instead of transposing out and back).
bool sink_through_batch_norm(Graph& g, Node& n) {
  if (n.op() != "batch_norm" || n.output_type().shape.size() != 4) return false;
  if (ir::attr_string(n.attrs(), "data_format", n.op()) != "NCHW") return false;
  std::optional<Value> source = channels_last_source(n.input(0));
  if (!source) return false;
  std::vector<Value> inputs(n.inputs().begin(), n.inputs().end());
  inputs[0] = *source;
  ir::Attrs attrs = n.attrs();
  attrs["data_format"] = std::string("NHWC");
  Node* nhwc = g.insert_node(&n, "batch_norm", std::move(inputs), std::move(attrs), n.info());
  g.replace_all_uses(n.output(), transposed(g, &n, nhwc->output(), kToChannelsFirst));
  return true;
}

class FormatTransform final : public Pass {
 public:
  std::string_view name() const override { return "format-transform"; }

  bool run(Graph& graph) override {
    bool changed = false;
    for_each_graph(graph, [&](Graph& g) {
      for (Node* node : g.topological_order()) {
        if (!node->has_uses() || node->def() == nullptr) continue;
        changed = to_channels_last(g, *node) || sink_through_elementwise(g, *node) ||
                  sink_through_concat(g, *node) || sink_through_batch_norm(g, *node) || changed;
      }
    });
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_format_transform() {
  return std::make_unique<FormatTransform>();
}

}  // namespace mf::passes
