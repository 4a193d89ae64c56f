#include "engine/eager/eager_layout.h"

#include <optional>

#include "engine/eager/dispatch.h"
#include "engine/scope.h"
#include "runtime/kernels/conv_layout.h"

namespace mf::engine {
namespace {

const std::vector<int64_t> kToChannelsLast = {0, 2, 3, 1};   // NCHW -> NHWC
const std::vector<int64_t> kToChannelsFirst = {0, 3, 1, 2};  // NHWC -> NCHW
constexpr int64_t kNhwcAxisOf[] = {0, 3, 1, 2};              // NCHW axis -> its NHWC position

bool is_window_op(std::string_view op) {
  return op == "conv2d" || op == "max_pool2d" || op == "avg_pool2d";
}

// A broadcast operand at most per-channel: aligned to rank 4, its H and W are 1 (a (C, 1, 1)
// bias). Such a tensor has the same bytes in both orders, so it needs no copy.
std::optional<ir::Shape> per_channel_rank4(const ir::Shape& s) {
  if (s.empty() || s.size() > 4) return std::nullopt;
  ir::Shape rank4(4 - s.size(), 1);
  rank4.insert(rank4.end(), s.begin(), s.end());
  if (rank4[2] != 1 || rank4[3] != 1) return std::nullopt;
  return rank4;
}

// Everything as the user sees it: channels-last inputs copied to NCHW first.
EagerLayout all_plain(std::span<const ir::TensorType> inputs,
                      const std::vector<bool>& channels_last, const ir::Attrs& attrs,
                      std::span<const ir::TensorType> outputs) {
  EagerLayout plan;
  for (size_t i = 0; i < inputs.size(); ++i) {
    plan.convert.push_back(channels_last[i] ? EagerLayout::Convert::kToPlain
                                            : EagerLayout::Convert::kNone);
  }
  plan.kernel_inputs.assign(inputs.begin(), inputs.end());
  plan.kernel_outputs.assign(outputs.begin(), outputs.end());
  plan.attrs = attrs;
  return plan;
}

// Input i read in NHWC order as it is stored (channels-last, or the same bytes either way).
bool stored_channels_last(std::span<const ir::TensorType> inputs,
                          const std::vector<bool>& channels_last, size_t i) {
  return channels_last[i] || (inputs[i].shape.size() == 4 && same_in_both_orders(inputs[i].shape));
}

void outputs_in_nhwc(EagerLayout& plan) {
  for (auto& t : plan.kernel_outputs) t.shape = nhwc_of(t.shape);
  plan.outputs_channels_last = true;
}

// conv2d / max_pool2d / avg_pool2d over NCHW float32 x: data_format NHWC when x is (or, for a
// convolution that would reorder it anyway, becomes) channels-last.
std::optional<EagerLayout> plan_window_op(const ir::OpDef& def,
                                          std::span<const ir::TensorType> inputs,
                                          const std::vector<bool>& channels_last,
                                          const ir::Attrs& attrs,
                                          std::span<const ir::TensorType> outputs,
                                          bool deterministic) {
  if (inputs.empty() || inputs[0].dtype != ir::DType::kFloat32 || inputs[0].shape.size() != 4 ||
      outputs.size() != 1 || ir::attr_string(attrs, "data_format", def.name) != "NCHW") {
    return std::nullopt;
  }
  EagerLayout plan = all_plain(inputs, channels_last, attrs, outputs);
  if (stored_channels_last(inputs, channels_last, 0)) {
    plan.convert[0] = EagerLayout::Convert::kNone;
  } else if (def.name == "conv2d" &&
             runtime::ops::conv2d_reorders_to_channels_last(inputs, attrs, deterministic)) {
    plan.convert[0] = EagerLayout::Convert::kToChannelsLast;
  } else {
    return std::nullopt;
  }
  plan.kernel_inputs[0].shape = nhwc_of(inputs[0].shape);
  plan.attrs["data_format"] = std::string("NHWC");
  outputs_in_nhwc(plan);
  return plan;
}

// An elementwise op over channels-last operands of the output's shape, scalars and per-channel
// operands runs on the stored bytes.
std::optional<EagerLayout> plan_elementwise(std::span<const ir::TensorType> inputs,
                                            const std::vector<bool>& channels_last,
                                            const ir::Attrs& attrs,
                                            std::span<const ir::TensorType> outputs) {
  if (outputs.size() != 1 || outputs[0].shape.size() != 4) return std::nullopt;
  EagerLayout plan = all_plain(inputs, channels_last, attrs, outputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Shape& s = inputs[i].shape;
    plan.convert[i] = EagerLayout::Convert::kNone;
    if (s.empty()) continue;
    if (stored_channels_last(inputs, channels_last, i)) {
      if (channels_last[i] && s != outputs[0].shape) return std::nullopt;  // a broadcast activation
      plan.kernel_inputs[i].shape = nhwc_of(s);
    } else if (std::optional<ir::Shape> rank4 = per_channel_rank4(s)) {
      plan.kernel_inputs[i].shape = nhwc_of(*rank4);
    } else {
      return std::nullopt;  // a plain activation of its own: leave the op in NCHW
    }
  }
  outputs_in_nhwc(plan);
  return plan;
}

// concat of channels-last activations along an NCHW axis = concat along its NHWC position.
std::optional<EagerLayout> plan_concat(std::span<const ir::TensorType> inputs,
                                       const std::vector<bool>& channels_last,
                                       const ir::Attrs& attrs,
                                       std::span<const ir::TensorType> outputs) {
  if (outputs.size() != 1 || outputs[0].shape.size() != 4) return std::nullopt;
  EagerLayout plan = all_plain(inputs, channels_last, attrs, outputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!stored_channels_last(inputs, channels_last, i)) return std::nullopt;
    plan.convert[i] = EagerLayout::Convert::kNone;
    plan.kernel_inputs[i].shape = nhwc_of(inputs[i].shape);
  }
  int64_t axis = ir::attr_int(attrs, "axis", "concat");
  if (axis < 0) axis += 4;
  plan.attrs["axis"] = kNhwcAxisOf[axis];
  outputs_in_nhwc(plan);
  return plan;
}

// Inference batch_norm over a channels-last x: its data_format NHWC kernel on the stored bytes
// (the per-channel vectors are the same either way), as the format-transform pass runs it.
std::optional<EagerLayout> plan_batch_norm(std::span<const ir::TensorType> inputs,
                                           const std::vector<bool>& channels_last,
                                           const ir::Attrs& attrs,
                                           std::span<const ir::TensorType> outputs) {
  if (inputs.size() != 5 || !channels_last[0] || inputs[0].shape.size() != 4 ||
      outputs.size() != 1 || ir::attr_string(attrs, "data_format", "batch_norm") != "NCHW") {
    return std::nullopt;
  }
  EagerLayout plan = all_plain(inputs, channels_last, attrs, outputs);
  plan.convert[0] = EagerLayout::Convert::kNone;
  plan.kernel_inputs[0].shape = nhwc_of(inputs[0].shape);
  plan.attrs["data_format"] = std::string("NHWC");
  outputs_in_nhwc(plan);
  return plan;
}

}  // namespace

ir::Shape nhwc_of(const ir::Shape& nchw) {
  return {nchw[0], nchw[2], nchw[3], nchw[1]};
}

ir::Shape nchw_of(const ir::Shape& nhwc) {
  return {nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
}

bool same_in_both_orders(const ir::Shape& nchw) {
  return nchw.size() == 4 && (nchw[1] == 1 || (nchw[2] == 1 && nchw[3] == 1));
}

EagerLayout plan_eager_layout(const ir::OpDef& def, std::span<const ir::TensorType> inputs,
                              const std::vector<bool>& channels_last, const ir::Attrs& attrs,
                              std::span<const ir::TensorType> outputs, bool keep_channels_last,
                              bool deterministic) {
  std::optional<EagerLayout> kept;
  if (keep_channels_last) {
    bool any = false;
    for (bool c : channels_last) any = any || c;
    if (is_window_op(def.name)) {
      kept = plan_window_op(def, inputs, channels_last, attrs, outputs, deterministic);
    } else if (any && def.has(ir::Trait::kElementwise)) {
      kept = plan_elementwise(inputs, channels_last, attrs, outputs);
    } else if (any && def.name == "concat") {
      kept = plan_concat(inputs, channels_last, attrs, outputs);
    } else if (any && def.name == "batch_norm") {
      kept = plan_batch_norm(inputs, channels_last, attrs, outputs);
    }
  }
  return kept ? std::move(*kept) : all_plain(inputs, channels_last, attrs, outputs);
}

Tensor plain_tensor(const Tensor& t, std::source_location where) {
  if (!t.defined() || !t.impl()->channels_last) return t;
  TensorImpl& impl = *t.impl();
  std::lock_guard lock(impl.plain_mutex);
  if (impl.plain == nullptr) {
    auto plain = std::make_shared<TensorImpl>();
    plain->type = impl.type;
    submit_kernel(ir::get_op("transpose"), {{"perm", kToChannelsFirst}},
                  {{t.impl(), {impl.type.dtype, nhwc_of(impl.type.shape)}}}, {{plain, impl.type}},
                  /*deterministic=*/true, runtime::TaskInfo{"transpose", current_scope(), where});
    impl.plain = std::move(plain);
  }
  return Tensor(impl.plain);
}

Tensor channels_last_tensor(const Tensor& t, std::source_location where) {
  auto stored = std::make_shared<TensorImpl>();
  stored->type = t.type();
  stored->channels_last = true;
  submit_kernel(ir::get_op("transpose"), {{"perm", kToChannelsLast}}, {{t.impl(), t.type()}},
                {{stored, {t.dtype(), nhwc_of(t.shape())}}}, /*deterministic=*/true,
                runtime::TaskInfo{"transpose", current_scope(), where});
  return Tensor(stored);
}

}  // namespace mf::engine
