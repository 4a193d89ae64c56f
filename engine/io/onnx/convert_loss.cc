// ONNX import: the losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (both from opset
// 12; 13 only added types), built from registry ops: no loss op of their own. For scores x
// (N, C, d1..dk) and targets t (N, d1..dk), Int32 or Int64:
//
//   loss[n, d] = -x[n, t[n, d], d] * weight[t[n, d]]   (weight 1 when absent)
//   loss[n, d] = 0 (and its weight 0) where t[n, d] == ignore_index
//
// reduced by none, sum, or mean: the sum of the losses over the sum of the weights applied (the
// count of targets not ignored without weights; 0 / 0 = NaN when every target is ignored).
// SoftmaxCrossEntropyLoss is the same loss of log_softmax(x) over axis 1, whose value is its
// optional second output log_prob.
//
// An ignored target may lie outside [0, C) (-1, 100): it is replaced by 0 before any gather reads
// with it, and its loss and weight are then masked to 0, so no index out of range reaches the
// gathers (which would refuse it at run time). Any other target out of range is the gathers'
// InvalidArgument when the graph runs.

#include "engine/io/onnx/importer_impl.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace mf::onnx::detail {

void Importer::add_loss_converters(ConverterTable& table) {
  add_converters(table, {
                            {"NegativeLogLikelihoodLoss", &Importer::convert_nll_loss},
                            {"SoftmaxCrossEntropyLoss", &Importer::convert_softmax_cross_entropy},
                        });
}

Value Importer::nll_loss(Value x, Value target, std::optional<Value> weight) {
  const Shape xs = shape_of(x);
  const Shape ts = shape_of(target);
  const DType t = x.type().dtype;
  const DType it = target.type().dtype;
  MF_CHECK(xs.size() >= 2, InvalidArgument, describe(), ": the scores must be (N, C, ...), got ",
           ir::shape_to_string(xs));
  MF_CHECK(it == DType::kInt32 || it == DType::kInt64, InvalidArgument, describe(),
           ": the targets must be INT32 or INT64, got ", ir::dtype_name(it));
  Shape expected = xs;
  expected.erase(expected.begin() + 1);
  MF_CHECK(ts == expected, InvalidArgument, describe(), ": the targets ", ir::shape_to_string(ts),
           " must have the shape of the scores ", ir::shape_to_string(xs), " without axis 1 (",
           ir::shape_to_string(expected), ")");
  if (weight) {
    MF_CHECK(shape_of(*weight) == Shape{xs[1]}, InvalidArgument, describe(),
             ": the weights must have shape (", xs[1], ") for the ", xs[1], " classes, got ",
             ir::shape_to_string(shape_of(*weight)));
    if (weight->type().dtype != t) weight = emit("cast", {*weight}, {{"dtype", t}});
  }

  const std::string reduction = attr_string("reduction", "mean");
  MF_CHECK(reduction == "none" || reduction == "sum" || reduction == "mean", InvalidArgument,
           describe(), ": reduction '", echo(reduction, 40), "' is not one of none, sum, mean");

  // The ignored targets, when ignore_index is given and some target could equal it (an Int32
  // target never equals an index beyond Int32's range: then nothing is ignored).
  std::optional<Value> ignored;
  if (has_attr("ignore_index")) {
    const int64_t ii = attr_int("ignore_index", 0);
    std::optional<Value> index;
    if (it == DType::kInt64) {
      index = Value(graph_->add_constant<int64_t>({}, std::vector<int64_t>{ii}));
    } else if (ii >= std::numeric_limits<int32_t>::min() &&
               ii <= std::numeric_limits<int32_t>::max()) {
      index = Value(graph_->add_constant<int32_t>({}, std::vector<int32_t>{int32_t(ii)}));
    }
    if (index) ignored = emit("equal", {target, *index});
  }
  // Ignored targets read class 0 (which exists when C >= 1); their results are masked below.
  Value safe = target;
  if (ignored) safe = emit("select", {*ignored, scalar(0, it), target});

  // -x[n, t[n, d], d]: gather_elements along the class axis with the targets as (N, 1, d...).
  Shape picked = xs;
  picked[1] = 1;
  const Value gathered =
      emit("gather_elements", {x, reshape(safe, picked)}, {{"axis", int64_t{1}}});
  Value loss = emit("neg", {reshape(gathered, ts)});
  if (ignored) loss = emit("select", {*ignored, scalar(0, t), loss});

  // The weight applied to each target; none when every weight is 1 and nothing is ignored.
  std::optional<Value> applied;
  if (weight) {
    applied = emit("gather", {*weight, safe}, {{"axis", int64_t{0}}});
    if (ignored) applied = emit("select", {*ignored, scalar(0, t), *applied});
    loss = emit("mul", {*applied, loss});
  } else if (ignored) {
    applied = emit("select", {*ignored, scalar(0, t), scalar(1, t)});
  }

  if (reduction == "none") return loss;
  std::vector<int64_t> all;
  for (int64_t d = 0; d < int64_t(ts.size()); ++d) all.push_back(d);
  const ir::Attrs whole = {{"axes", all}, {"keep_dims", false}};
  if (reduction == "sum") return emit("reduce_sum", {loss}, whole);
  if (!applied) return emit("reduce_mean", {loss}, whole);
  return emit("div", {emit("reduce_sum", {loss}, whole), emit("reduce_sum", {*applied}, whole)});
}

void Importer::convert_nll_loss() {
  MF_CHECK(opset_ >= 12, InvalidArgument, describe(),
           ": NegativeLogLikelihoodLoss exists from opset 12 on; the node is malformed");
  Value x = input(0);
  require_float(x, "input");
  Value target = input(1);
  std::optional<Value> weight;
  if (has_input(2)) weight = input(2);
  set_output(0, nll_loss(x, target, weight));
}

void Importer::convert_softmax_cross_entropy() {
  MF_CHECK(opset_ >= 12, InvalidArgument, describe(),
           ": SoftmaxCrossEntropyLoss exists from opset 12 on; the node is malformed");
  Value scores = input(0);
  require_float(scores, "scores");
  MF_CHECK(rank_of(scores) >= 2, InvalidArgument, describe(),
           ": the scores must be (N, C, ...), got ", ir::shape_to_string(shape_of(scores)));
  Value labels = input(1);
  std::optional<Value> weights;
  if (has_input(2)) weights = input(2);
  const Value log_prob = emit("log_softmax", {scores}, {{"axis", int64_t{1}}});
  set_output(0, nll_loss(log_prob, labels, weights));
  set_output(1, log_prob);
}

}  // namespace mf::onnx::detail
