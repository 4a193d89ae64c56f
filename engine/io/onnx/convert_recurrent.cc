// ONNX import: the recurrent ops RNN, GRU and LSTM, unrolled over their static sequence into
// registry ops, with the equations of the ONNX spec. Every step's input projection X_t W^T (+ the
// biases that do not wait on the state) is one matmul over the whole sequence; each step then adds
// its recurrent matmul H_{t-1} R^T and applies the gates. Read: directions forward, reverse and
// bidirectional; layout 0 (sequence first) and 1 (batch first, opset 14); initial states;
// sequence_lens, which must be known at import: a batch entry's steps past its length give 0 in Y
// and leave its state as it was, so Y_h holds its last valid state; `clip` on the gates' inputs;
// GRU's linear_before_reset; LSTM's peepholes and input_forget; the activations Sigmoid, Tanh,
// Relu, HardSigmoid, LeakyRelu and Affine with their alpha and beta.

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/io/onnx/importer_impl.h"

namespace mf::onnx::detail {

void Importer::add_recurrent_converters(ConverterTable& table) {
  add_converters(table, {
                            {"RNN", &Importer::convert_recurrent},
                            {"GRU", &Importer::convert_recurrent},
                            {"LSTM", &Importer::convert_recurrent},
                        });
}

Value Importer::recurrent_activation(Value x, const std::string& name, double alpha, double beta,
                                     bool has_alpha, bool has_beta) {
  const DType t = x.type().dtype;
  if (name == "Sigmoid") return emit("sigmoid", {x});
  if (name == "Tanh") return emit("tanh", {x});
  if (name == "Relu") return emit("relu", {x});
  if (name == "HardSigmoid") {
    Value y = emit("add", {emit("mul", {x, scalar(has_alpha ? alpha : 0.2, t)}),
                           scalar(has_beta ? beta : 0.5, t)});
    return emit("minimum", {emit("maximum", {y, scalar(0, t)}), scalar(1, t)});
  }
  if (name == "LeakyRelu") {
    return emit("select", {emit("greater", {x, scalar(0, t)}), x,
                           emit("mul", {x, scalar(has_alpha ? alpha : 0.01, t)})});
  }
  if (name == "Affine") {
    return emit("add", {emit("mul", {x, scalar(has_alpha ? alpha : 1.0, t)}),
                        scalar(has_beta ? beta : 0.0, t)});
  }
  unsupported("activation '" + echo(name, 40) +
              "' is not supported; Sigmoid, Tanh, Relu, HardSigmoid, LeakyRelu and Affine are");
}

void Importer::convert_recurrent() {
  const std::string& op = node_->op_type();
  const bool gru = op == "GRU", lstm = op == "LSTM";
  const int64_t gates = lstm ? 4 : gru ? 3 : 1;
  const std::vector<std::string> default_activations =
      lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
      : gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
            : std::vector<std::string>{"Tanh"};
  const size_t per_direction = default_activations.size();

  Value x = input(0), w = input(1), r = input(2);
  require_float(x, "X");
  const DType t = x.type().dtype;
  const int64_t layout = opset_ >= 14 ? attr_int("layout", 0) : 0;
  MF_CHECK(layout == 0 || layout == 1, InvalidArgument, describe(), ": layout must be 0 or 1");
  MF_CHECK(rank_of(x) == 3 && rank_of(w) == 3 && rank_of(r) == 3, InvalidArgument, describe(),
           ": X, W and R must be 3-D, got ", ir::shape_to_string(shape_of(x)), ", ",
           ir::shape_to_string(shape_of(w)), ", ", ir::shape_to_string(shape_of(r)));
  if (layout == 1) x = emit("transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  const int64_t steps = shape_of(x)[0], batch = shape_of(x)[1], features = shape_of(x)[2];
  // Unrolled, each step is about fifteen nodes: a sequence is bounded before the graph grows.
  if (steps > 4096) {
    unsupported("a sequence of " + std::to_string(steps) +
                " steps; the unrolled form takes at most 4096");
  }
  const std::string direction = attr_string("direction", "forward");
  MF_CHECK(direction == "forward" || direction == "reverse" || direction == "bidirectional",
           InvalidArgument, describe(), ": direction '", echo(direction, 40),
           "' is not forward, reverse or bidirectional");
  const int64_t directions = direction == "bidirectional" ? 2 : 1;
  const int64_t hidden = attr_int("hidden_size", shape_of(r)[2]);
  MF_CHECK(hidden >= 1 && shape_of(w) == Shape({directions, gates * hidden, features}) &&
               shape_of(r) == Shape({directions, gates * hidden, hidden}),
           InvalidArgument, describe(), ": W ", ir::shape_to_string(shape_of(w)), " and R ",
           ir::shape_to_string(shape_of(r)), " do not fit ", directions, " direction(s) of ", gates,
           " gate(s) of hidden_size ", hidden, " over ", features, " input features");
  const Shape state_shape{directions, batch, hidden};
  const auto optional_input = [&](size_t i, const Shape& want, const char* what) {
    if (!has_input(i)) return std::optional<Value>();
    Value v = input(i);
    MF_CHECK(v.type() == TensorType({t, want}), InvalidArgument, describe(), ": ", what, " is ",
             ir::type_to_string(v.type()), ", expected ", ir::type_to_string({t, want}));
    return std::optional<Value>(v);
  };
  const std::optional<Value> bias = optional_input(3, {directions, 2 * gates * hidden}, "B");
  std::vector<int64_t> lengths;
  if (has_input(4)) {
    lengths = known_ints(4, "sequence_lens");
    MF_CHECK(int64_t(lengths.size()) == batch, InvalidArgument, describe(), ": sequence_lens has ",
             lengths.size(), " values for a batch of ", batch);
    for (int64_t n : lengths) {
      MF_CHECK(n >= 0 && n <= steps, InvalidArgument, describe(), ": a sequence length ", n,
               " is outside [0, ", steps, "]");
    }
    if (std::all_of(lengths.begin(), lengths.end(), [&](int64_t n) { return n == steps; })) {
      lengths.clear();  // every entry runs every step: nothing to mask
    }
  }
  const std::optional<Value> initial_h = optional_input(5, state_shape, "initial_h");
  const std::optional<Value> initial_c =
      lstm ? optional_input(6, state_shape, "initial_c") : std::optional<Value>();
  const std::optional<Value> peepholes =
      lstm ? optional_input(7, {directions, 3 * hidden}, "P") : std::optional<Value>();
  const bool input_forget = lstm && attr_int("input_forget", 0) != 0;
  const bool linear_before_reset = gru && attr_int("linear_before_reset", 0) != 0;
  const bool has_clip = has_attr("clip");
  const double clip = attr_float("clip", 0);
  MF_CHECK(!has_clip || clip > 0, InvalidArgument, describe(), ": clip must be > 0");

  std::vector<std::string> activations;
  if (const AttributeProto* a = find_attr("activations")) {
    check_attr(*a, AttributeProto::STRINGS);
    for (const std::string& s : a->strings()) activations.push_back(s);
  } else {
    for (int64_t d = 0; d < directions; ++d) {
      activations.insert(activations.end(), default_activations.begin(), default_activations.end());
    }
  }
  MF_CHECK(activations.size() == per_direction * size_t(directions), InvalidArgument, describe(),
           ": ", activations.size(), " activations for ", directions, " direction(s) of ",
           per_direction);
  std::vector<float> alphas, betas;
  if (const AttributeProto* a = find_attr("activation_alpha")) {
    alphas.assign(a->floats().begin(), a->floats().end());
  }
  if (const AttributeProto* b = find_attr("activation_beta")) {
    betas.assign(b->floats().begin(), b->floats().end());
  }

  // x's rows [begin, end) along `axis`.
  const auto cut = [&](Value v, size_t axis, int64_t begin, int64_t end) {
    std::vector<int64_t> b(size_t(rank_of(v)), 0), e(shape_of(v).begin(), shape_of(v).end());
    b[axis] = begin;
    e[axis] = end;
    return emit("slice", {v}, {{"begin", b}, {"end", e}});
  };
  const auto zeros = [&](const Shape& shape) {
    return emit("broadcast_to", {scalar(0, t)}, {{"shape", shape}});
  };
  const auto clipped = [&](Value v) {
    return has_clip ? emit("minimum", {emit("maximum", {v, scalar(-clip, t)}), scalar(clip, t)})
                    : v;
  };

  std::vector<Value> outputs, final_h, final_c;
  for (int64_t d = 0; d < directions; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const auto activate = [&](Value v, size_t k) {
      const size_t i = size_t(d) * per_direction + k;
      return recurrent_activation(clipped(v), activations[i], i < alphas.size() ? alphas[i] : 0,
                                  i < betas.size() ? betas[i] : 0, i < alphas.size(),
                                  i < betas.size());
    };
    const Value wd = reshape(cut(w, 0, d, d + 1), {gates * hidden, features});
    const Value rd = reshape(cut(r, 0, d, d + 1), {gates * hidden, hidden});
    // Every step's input projection at once: (steps * batch, features) x W^T.
    Value projected =
        emit("matmul", {reshape(x, {steps * batch, features}), wd}, {{"transpose_b", true}});
    projected = reshape(projected, {steps, batch, gates * hidden});
    std::optional<Value> recurrent_bias_h;  // GRU's Rb_h, applied with the reset gate
    if (bias) {
      const Value bd = reshape(cut(*bias, 0, d, d + 1), {2 * gates * hidden});
      const Value wb = cut(bd, 0, 0, gates * hidden);
      Value rb = cut(bd, 0, gates * hidden, 2 * gates * hidden);
      if (gru) {
        recurrent_bias_h = cut(rb, 0, 2 * hidden, 3 * hidden);
        rb = emit("concat", {cut(rb, 0, 0, 2 * hidden), zeros({hidden})}, {{"axis", int64_t{0}}});
      }
      projected = emit("add", {projected, emit("add", {wb, rb})});
    }
    Value h =
        initial_h ? reshape(cut(*initial_h, 0, d, d + 1), {batch, hidden}) : zeros({batch, hidden});
    Value c =
        initial_c ? reshape(cut(*initial_c, 0, d, d + 1), {batch, hidden}) : zeros({batch, hidden});
    std::optional<Value> p_i, p_o, p_f;
    if (peepholes) {
      const Value pd = reshape(cut(*peepholes, 0, d, d + 1), {3 * hidden});
      p_i = cut(pd, 0, 0, hidden);
      p_o = cut(pd, 0, hidden, 2 * hidden);
      p_f = cut(pd, 0, 2 * hidden, 3 * hidden);
    }
    const Value r_zr = gru ? cut(rd, 0, 0, 2 * hidden) : rd;
    const Value r_h = gru ? cut(rd, 0, 2 * hidden, 3 * hidden) : rd;
    std::vector<Value> ys;  // in the order computed; reversed below for reverse
    for (int64_t k = 0; k < steps; ++k) {
      const int64_t step = reverse ? steps - 1 - k : k;
      const Value xw = reshape(cut(projected, 0, step, step + 1), {batch, gates * hidden});
      const auto gate = [&](Value v, int64_t g) { return cut(v, 1, g * hidden, (g + 1) * hidden); };
      Value h_new, c_new = c;
      if (lstm) {
        const Value z = emit("add", {xw, emit("matmul", {h, rd}, {{"transpose_b", true}})});
        const auto peep = [&](Value v, const std::optional<Value>& p, Value state) {
          return p ? emit("add", {v, emit("mul", {*p, state})}) : v;
        };
        const Value i = activate(peep(gate(z, 0), p_i, c), 0);
        const Value f =
            input_forget ? emit("sub", {scalar(1, t), i}) : activate(peep(gate(z, 2), p_f, c), 0);
        const Value cell = activate(gate(z, 3), 1);
        c_new = emit("add", {emit("mul", {f, c}), emit("mul", {i, cell})});
        const Value o = activate(peep(gate(z, 1), p_o, c_new), 0);
        h_new = emit("mul", {o, activate(c_new, 2)});
      } else if (gru) {
        const Value zr = emit(
            "add", {cut(xw, 1, 0, 2 * hidden), emit("matmul", {h, r_zr}, {{"transpose_b", true}})});
        const Value z = activate(gate(zr, 0), 0);
        const Value reset = activate(gate(zr, 1), 0);
        Value candidate;
        if (linear_before_reset) {
          Value hr = emit("matmul", {h, r_h}, {{"transpose_b", true}});
          if (recurrent_bias_h) hr = emit("add", {hr, *recurrent_bias_h});
          candidate = emit("add", {gate(xw, 2), emit("mul", {reset, hr})});
        } else {
          Value hr = emit("matmul", {emit("mul", {reset, h}), r_h}, {{"transpose_b", true}});
          if (recurrent_bias_h) hr = emit("add", {hr, *recurrent_bias_h});
          candidate = emit("add", {gate(xw, 2), hr});
        }
        const Value hh = activate(candidate, 1);
        // H = (1 - z) * hh + z * H_prev
        h_new =
            emit("add", {emit("mul", {emit("sub", {scalar(1, t), z}), hh}), emit("mul", {z, h})});
      } else {
        h_new = activate(emit("add", {xw, emit("matmul", {h, rd}, {{"transpose_b", true}})}), 0);
      }
      Value y = h_new;
      if (!lengths.empty()) {
        std::vector<uint8_t> live(static_cast<size_t>(batch), 0);
        for (int64_t b = 0; b < batch; ++b) live[size_t(b)] = step < lengths[size_t(b)];
        const Value mask = graph_->add_constant({DType::kBool, {batch, 1}}, live);
        y = emit("select", {mask, h_new, scalar(0, t)});
        h_new = emit("select", {mask, h_new, h});
        if (lstm) c_new = emit("select", {mask, c_new, c});
      }
      h = h_new;
      c = c_new;
      ys.push_back(reshape(y, {1, 1, batch, hidden}));
    }
    if (reverse) std::reverse(ys.begin(), ys.end());
    outputs.push_back(steps == 1 ? ys[0] : emit("concat", ys, {{"axis", int64_t{0}}}));
    final_h.push_back(reshape(h, {1, batch, hidden}));
    final_c.push_back(reshape(c, {1, batch, hidden}));
  }
  const auto join = [&](const std::vector<Value>& parts, int64_t axis) {
    return parts.size() == 1 ? parts[0] : emit("concat", parts, {{"axis", axis}});
  };
  Value y = join(outputs, 1);  // (steps, directions, batch, hidden)
  Value y_h = join(final_h, 0), y_c = join(final_c, 0);
  if (layout == 1) {
    y = emit("transpose", {y}, {{"perm", std::vector<int64_t>{2, 0, 1, 3}}});
    y_h = emit("transpose", {y_h}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    y_c = emit("transpose", {y_c}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  }
  set_output(0, y);
  set_output(1, y_h);
  if (lstm) set_output(2, y_c);
}

}  // namespace mf::onnx::detail
