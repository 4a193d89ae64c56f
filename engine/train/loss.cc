#include "engine/train/loss.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "base/error.h"
#include "engine/ops.h"

namespace mf::nn {
namespace {

Tensor reduce(const Tensor& per_sample, Reduction reduction) {
  switch (reduction) {
    case Reduction::kNone:
      return per_sample;
    case Reduction::kSum:
      return ops::reduce_sum(per_sample);
    case Reduction::kMean:
      return ops::reduce_mean(per_sample);
  }
  return per_sample;
}

Tensor scalar_like(double value, const Tensor& like) {
  return ops::scalar(value, like.dtype());
}

void check_float_logits(const Tensor& logits, std::string_view loss) {
  MF_CHECK(logits.defined() && ir::is_floating(logits.dtype()), InvalidArgument, loss,
           ": logits must be a floating tensor, got ",
           logits.defined() ? ir::type_to_string(logits.type()) : std::string("an undefined one"));
}

// Float labels of the logits' dtype, broadcastable to the logits (MSE, L1, BCE).
void check_dense_labels(const Tensor& logits, const Tensor& labels, std::string_view loss) {
  check_float_logits(logits, loss);
  MF_CHECK(labels.defined(), InvalidArgument, loss, ": labels are undefined");
  MF_CHECK(labels.dtype() == logits.dtype(), InvalidArgument, loss, ": labels ",
           ir::type_to_string(labels.type()), " must have the logits' dtype (",
           ir::type_to_string(logits.type()), "); cast them first");
  const Shape& a = logits.shape();
  const Shape& b = labels.shape();
  bool broadcastable = b.size() <= a.size();
  for (size_t i = 0; broadcastable && i < b.size(); ++i) {
    const int64_t da = a[a.size() - 1 - i], db = b[b.size() - 1 - i];
    broadcastable = da == db || db == 1;
  }
  MF_CHECK(broadcastable, InvalidArgument, loss, ": labels ", ir::type_to_string(labels.type()),
           " do not broadcast to the logits ", ir::type_to_string(logits.type()));
}

bool is_index_dtype(DType t) {
  return t == DType::kInt32 || t == DType::kInt64;
}

// Class-index labels: an int32/int64 tensor of logits' shape without axis `class_axis`.
void check_index_labels(const Tensor& logits, const Tensor& labels, int64_t class_axis,
                        std::string_view loss) {
  MF_CHECK(labels.defined(), InvalidArgument, loss, ": labels are undefined");
  Shape expected = logits.shape();
  expected.erase(expected.begin() + class_axis);
  MF_CHECK(is_index_dtype(labels.dtype()) && labels.shape() == expected, InvalidArgument, loss,
           ": class-index labels must be int32 or int64 of shape ", ir::shape_to_string(expected),
           " for logits ", ir::type_to_string(logits.type()), ", got ",
           ir::type_to_string(labels.type()));
}

// -log_probs[.., label, ..] along axis 1 of log_probs, for labels with that axis removed.
Tensor pick(const Tensor& log_probs, const Tensor& labels) {
  const Tensor index = ops::expand_dims(labels, 1);
  const Tensor picked = ops::call("gather_elements", {log_probs, index}, {{"axis", int64_t{1}}})[0];
  return ops::squeeze(picked, {1});
}

}  // namespace

Reduction parse_reduction(std::string_view text, std::string_view loss) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (lower == "none") return Reduction::kNone;
  if (lower == "mean") return Reduction::kMean;
  if (lower == "sum") return Reduction::kSum;
  MF_FAIL(InvalidArgument, loss, ": reduction must be 'none', 'mean' or 'sum', got ", echo(text));
}

Tensor SoftmaxCrossEntropyWithLogits::operator()(const Tensor& logits, const Tensor& labels) {
  check_float_logits(logits, name());
  MF_CHECK(logits.shape().size() == 2, InvalidArgument, name(),
           ": logits must be (batch, classes), got ", ir::type_to_string(logits.type()));
  const Tensor log_probs = ops::log_softmax(logits, -1);
  if (sparse_) {
    check_index_labels(logits, labels, 1, name());
    return reduce(ops::neg(pick(log_probs, labels)), reduction_);
  }
  MF_CHECK(labels.defined() && labels.type() == logits.type(), InvalidArgument, name(),
           ": with sparse=False labels are a distribution of the logits' type ",
           ir::type_to_string(logits.type()), ", got ",
           labels.defined() ? ir::type_to_string(labels.type()) : std::string("undefined"),
           " (class indices need sparse=True)");
  return reduce(ops::neg(ops::reduce_sum(ops::mul(labels, log_probs), {-1})), reduction_);
}

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyOptions options) : options_(std::move(options)) {
  MF_CHECK(options_.label_smoothing >= 0.0 && options_.label_smoothing <= 1.0, InvalidArgument,
           "CrossEntropyLoss: label_smoothing must be in [0, 1], got ", options_.label_smoothing);
  const Tensor& w = options_.weight;
  MF_CHECK(!w.defined() || (ir::is_floating(w.dtype()) && w.shape().size() == 1), InvalidArgument,
           "CrossEntropyLoss: weight must be a float vector (one per class), got ",
           w.defined() ? ir::type_to_string(w.type()) : std::string());
}

Tensor CrossEntropyLoss::operator()(const Tensor& logits, const Tensor& labels) {
  check_float_logits(logits, name());
  const Shape& shape = logits.shape();
  MF_CHECK(shape.size() >= 1, InvalidArgument, name(), ": logits must have a class axis, got ",
           ir::type_to_string(logits.type()));
  // (C) alone is one sample: (1, C).
  if (shape.size() == 1) {
    const Tensor batched = ops::expand_dims(logits, 0);
    const Tensor batched_labels =
        labels.defined() && labels.shape().empty()
            ? ops::expand_dims(labels, 0)
            : (labels.defined() && labels.shape().size() == 1 && !is_index_dtype(labels.dtype())
                   ? ops::expand_dims(labels, 0)
                   : labels);
    const Tensor out = (*this)(batched, batched_labels);
    return options_.reduction == Reduction::kNone ? ops::squeeze(out, {0}) : out;
  }
  const int64_t classes = shape[1];
  const Tensor& weight = options_.weight;
  MF_CHECK(!weight.defined() || weight.shape()[0] == classes, InvalidArgument, name(), ": weight ",
           ir::type_to_string(weight.type()), " must have one entry per class (", classes, ")");
  const Tensor w = weight.defined() ? ops::cast(weight, logits.dtype()) : Tensor();
  const double eps = options_.label_smoothing;
  const Tensor log_probs = ops::log_softmax(logits, 1);
  // Weights broadcast along axis 1: (C, 1, 1, ...) for (N, C, d...).
  auto per_class = [&](const Tensor& t) {
    std::vector<int64_t> view(shape.size() - 1, 1);
    view[0] = classes;
    return ops::reshape(t, view);
  };
  const Tensor weighted = w.defined() ? ops::mul(log_probs, per_class(w)) : log_probs;

  if (!is_index_dtype(labels.defined() ? labels.dtype() : DType::kFloat32) && labels.defined() &&
      labels.shape() == shape) {
    MF_CHECK(labels.dtype() == logits.dtype(), InvalidArgument, name(), ": probability labels ",
             ir::type_to_string(labels.type()), " must have the logits' dtype ",
             ir::type_to_string(logits.type()));
    Tensor target = labels;
    if (eps > 0) {
      target = ops::add(ops::mul(labels, scalar_like(1 - eps, logits)),
                        scalar_like(eps / double(classes), logits));
    }
    const Tensor per_sample = ops::neg(ops::reduce_sum(ops::mul(target, weighted), {1}));
    return reduce(per_sample, options_.reduction);
  }

  check_index_labels(logits, labels, 1, name());
  const Tensor ignore = ops::cast(ops::scalar(double(options_.ignore_index)), labels.dtype());
  const Tensor is_ignored = ops::equal(labels, ignore);
  const Tensor safe = ops::select(is_ignored, ops::cast(ops::scalar(0), labels.dtype()), labels);
  const Tensor counts = ops::select(is_ignored, scalar_like(0, logits), scalar_like(1, logits));
  const Tensor sample_weight =
      w.defined() ? ops::mul(ops::call("gather", {w, safe}, {{"axis", int64_t{0}}})[0], counts)
                  : counts;
  Tensor per_sample = ops::mul(ops::neg(pick(log_probs, safe)), sample_weight);
  if (eps > 0) {
    const Tensor smooth = ops::mul(ops::neg(ops::reduce_sum(weighted, {1})), counts);
    per_sample = ops::add(ops::mul(per_sample, scalar_like(1 - eps, logits)),
                          ops::mul(smooth, scalar_like(eps / double(classes), logits)));
  }
  if (options_.reduction == Reduction::kMean) {
    return ops::div(ops::reduce_sum(per_sample), ops::reduce_sum(sample_weight));
  }
  return reduce(per_sample, options_.reduction);
}

Tensor MSELoss::operator()(const Tensor& logits, const Tensor& labels) {
  check_dense_labels(logits, labels, name());
  return reduce(ops::square(ops::sub(logits, labels)), reduction_);
}

Tensor L1Loss::operator()(const Tensor& logits, const Tensor& labels) {
  check_dense_labels(logits, labels, name());
  return reduce(ops::abs(ops::sub(logits, labels)), reduction_);
}

Tensor BCEWithLogitsLoss::operator()(const Tensor& logits, const Tensor& labels) {
  check_dense_labels(logits, labels, name());
  MF_CHECK(labels.shape() == logits.shape(), InvalidArgument, name(), ": labels ",
           ir::type_to_string(labels.type()), " must have the logits' shape ",
           ir::shape_to_string(logits.shape()));
  const Tensor& x = logits;
  const Tensor& y = labels;
  const Tensor one = scalar_like(1, x);
  // log(1 + exp(-|x|)): never overflows.
  const Tensor softplus_tail = ops::log(ops::add(one, ops::exp(ops::neg(ops::abs(x)))));
  Tensor loss;
  if (pos_weight_.defined()) {
    const Tensor p = ops::cast(pos_weight_, x.dtype());
    const Tensor log_weight = ops::add(one, ops::mul(ops::sub(p, one), y));
    loss = ops::add(ops::mul(ops::sub(one, y), x),
                    ops::mul(log_weight, ops::add(softplus_tail, ops::relu(ops::neg(x)))));
  } else {
    loss = ops::add(ops::sub(ops::relu(x), ops::mul(x, y)), softplus_tail);
  }
  if (weight_.defined()) loss = ops::mul(loss, ops::cast(weight_, x.dtype()));
  return reduce(loss, reduction_);
}

}  // namespace mf::nn
