// ONNX import: elementwise ops, activations and casts.

#include "engine/io/onnx/importer_impl.h"

#include <limits>
#include <map>
#include <string>

#include "base/error.h"

namespace mf::onnx::detail {

void Importer::add_elementwise_converters(ConverterTable& table) {
  add_converters(table, {
                            {"Abs", &Importer::convert_unary},
                            {"Add", &Importer::convert_binary},
                            {"And", &Importer::convert_binary},
                            {"Cast", &Importer::convert_cast},
                            {"CastLike", &Importer::convert_cast_like},
                            {"Ceil", &Importer::convert_unary},
                            {"Celu", &Importer::convert_celu},
                            {"Clip", &Importer::convert_clip},
                            {"Div", &Importer::convert_binary},
                            {"Dropout", &Importer::convert_dropout},
                            {"Elu", &Importer::convert_elu},
                            {"Equal", &Importer::convert_binary},
                            {"Erf", &Importer::convert_unary},
                            {"Exp", &Importer::convert_unary},
                            {"Floor", &Importer::convert_unary},
                            {"Greater", &Importer::convert_binary},
                            {"GreaterOrEqual", &Importer::convert_compare_or_equal},
                            {"HardSigmoid", &Importer::convert_hard_sigmoid},
                            {"HardSwish", &Importer::convert_hard_swish},
                            {"Identity", &Importer::convert_identity},
                            {"IsInf", &Importer::convert_is_inf},
                            {"IsNaN", &Importer::convert_unary},
                            {"LeakyRelu", &Importer::convert_leaky_relu},
                            {"Less", &Importer::convert_binary},
                            {"LessOrEqual", &Importer::convert_compare_or_equal},
                            {"Log", &Importer::convert_unary},
                            {"Max", &Importer::convert_variadic},
                            {"Mean", &Importer::convert_variadic},
                            {"Min", &Importer::convert_variadic},
                            {"Mod", &Importer::convert_mod},
                            {"Mul", &Importer::convert_binary},
                            {"Neg", &Importer::convert_unary},
                            {"Not", &Importer::convert_unary},
                            {"Or", &Importer::convert_binary},
                            {"Pow", &Importer::convert_binary},
                            {"PRelu", &Importer::convert_prelu},
                            {"Reciprocal", &Importer::convert_reciprocal},
                            {"Relu", &Importer::convert_unary},
                            {"Round", &Importer::convert_unary},
                            {"Selu", &Importer::convert_selu},
                            {"Shrink", &Importer::convert_shrink},
                            {"Sigmoid", &Importer::convert_unary},
                            {"Sign", &Importer::convert_unary},
                            {"Softplus", &Importer::convert_softplus},
                            {"Softsign", &Importer::convert_softsign},
                            {"Sqrt", &Importer::convert_unary},
                            {"Sub", &Importer::convert_binary},
                            {"Sum", &Importer::convert_variadic},
                            {"Tanh", &Importer::convert_unary},
                            {"ThresholdedRelu", &Importer::convert_thresholded_relu},
                            {"Sin", &Importer::convert_unary},
                            {"Cos", &Importer::convert_unary},
                            {"Det", &Importer::convert_unary},
                            {"Tan", &Importer::convert_unary},
                            {"Asin", &Importer::convert_unary},
                            {"Acos", &Importer::convert_unary},
                            {"Atan", &Importer::convert_unary},
                            {"Sinh", &Importer::convert_unary},
                            {"Cosh", &Importer::convert_unary},
                            {"Asinh", &Importer::convert_unary},
                            {"Acosh", &Importer::convert_unary},
                            {"Atanh", &Importer::convert_unary},
                            {"Where", &Importer::convert_where},
                            {"Xor", &Importer::convert_binary},
                        });
}

void Importer::convert_unary() {
  static const std::map<std::string, std::string, std::less<>> ops = {
      {"Abs", "abs"},         {"Ceil", "ceil"},   {"Erf", "erf"},     {"Exp", "exp"},
      {"Floor", "floor"},     {"IsNaN", "isnan"}, {"Log", "log"},     {"Neg", "neg"},
      {"Not", "logical_not"}, {"Relu", "relu"},   {"Round", "round"}, {"Sigmoid", "sigmoid"},
      {"Sign", "sign"},       {"Sqrt", "sqrt"},   {"Tanh", "tanh"},   {"Sin", "sin"},
      {"Cos", "cos"},         {"Tan", "tan"},     {"Asin", "asin"},   {"Acos", "acos"},
      {"Atan", "atan"},       {"Sinh", "sinh"},   {"Cosh", "cosh"},   {"Asinh", "asinh"},
      {"Acosh", "acosh"},     {"Atanh", "atanh"}, {"Det", "det"},
  };
  set_output(0, emit(ops.at(node_->op_type()), {input(0)}));
}

void Importer::convert_binary() {
  static const std::map<std::string, std::string, std::less<>> ops = {
      {"Add", "add"},         {"Sub", "sub"},       {"Mul", "mul"},         {"Div", "div"},
      {"Pow", "pow"},         {"Equal", "equal"},   {"Less", "less"},       {"Greater", "greater"},
      {"And", "logical_and"}, {"Or", "logical_or"}, {"Xor", "logical_xor"},
  };
  Value a = input(0), b = input(1);
  if (node_->op_type() == "Pow" && !ir::is_floating(a.type().dtype)) {
    // An integer base: computed in float64 (exact wherever the result fits in 53 bits) and
    // truncated back to the base's type, as ONNX's reference (numpy's power, then astype) does.
    const DType base = a.type().dtype;
    MF_CHECK(base == DType::kInt32 || base == DType::kInt64, InvalidArgument, describe(),
             ": Pow's base must be numeric, got ", ir::dtype_name(base));
    const Value wide = emit("pow", {emit("cast", {a}, {{"dtype", DType::kFloat64}}),
                                    emit("cast", {b}, {{"dtype", DType::kFloat64}})});
    set_output(0, emit("cast", {wide}, {{"dtype", base}}));
    return;
  }
  // Pow alone lets the exponent's type differ from the base's; the IR wants one dtype.
  if (node_->op_type() == "Pow" && b.type().dtype != a.type().dtype) {
    b = emit("cast", {b}, {{"dtype", a.type().dtype}});
  }
  std::string op = ops.at(node_->op_type());
  // ONNX Div truncates integers toward zero; the registry's div is true division on floats.
  if (op == "div" && !ir::is_floating(a.type().dtype)) op = "truncate_div";
  set_output(0, emit(op, {a, b}));
}

// a >= b as (a > b) or (a == b), a <= b as (a < b) or (a == b): exact, NaN included (it makes
// every comparison false, so both sides are false, as a >= b is).
void Importer::convert_compare_or_equal() {
  MF_CHECK(opset_ >= 12, InvalidArgument, describe(), ": ", node_->op_type(),
           " exists from opset 12 on; the node is malformed");
  Value a = input(0), b = input(1);
  const Value strict = emit(node_->op_type() == "GreaterOrEqual" ? "greater" : "less", {a, b});
  set_output(0, emit("logical_or", {strict, emit("equal", {a, b})}));
}

// fmod=1: the remainder has the dividend's sign (C's fmod; the only form ONNX allows on floats);
// fmod=0: the divisor's sign (Python's %), integers only.
void Importer::convert_mod() {
  Value a = input(0), b = input(1);
  const bool fmod = attr_int("fmod", 0) != 0;
  if (!fmod && ir::is_floating(a.type().dtype)) {
    MF_FAIL(InvalidArgument, describe(), ": Mod on ", ir::dtype_name(a.type().dtype),
            " inputs needs fmod=1 (ONNX defines fmod=0 for integers only); the node is malformed");
  }
  set_output(0, emit(fmod ? "truncate_mod" : "floor_mod", {a, b}));
}

void Importer::convert_variadic() {
  const std::string& op = node_->op_type();
  const std::string ir_op = op == "Max" ? "maximum" : op == "Min" ? "minimum" : "add";
  Value acc = input(0);
  for (size_t i = 1; i < num_inputs(); ++i) acc = emit(ir_op, {acc, input(i)});
  if (op == "Mean" && num_inputs() > 1) {
    acc = emit("div", {acc, scalar(double(num_inputs()), acc.type().dtype)});
  }
  set_output(0, acc);
}

void Importer::convert_identity() {
  set_output(0, input(0));
}

// In inference Dropout is the identity. From opset 12 ratio and training_mode are inputs and a
// true training_mode is refused; before, ratio is an attribute and nothing selects training
// (is_test went in opset 7).
void Importer::convert_dropout() {
  if (opset_ >= 12) {
    if (std::optional<HostTensor> training = known(2); training && training->size() == 1) {
      // Training with ratio 0 drops nothing: the identity, as in inference. Any other ratio is
      // random.
      const std::optional<HostTensor> ratio = known(1);
      const bool keeps_all =
          !has_input(1) ? false : ratio && ratio->size() == 1 && ratio->at(0) == 0;
      if (training->at(0) != 0 && !keeps_all) {
        unsupported(
            "training_mode is true with a ratio other than 0 (random); export the model in "
            "eval mode");
      }
    } else if (has_input(2)) {
      unsupported("training_mode is not a constant; export the model in eval mode");
    }
  }
  Value x = input(0);
  set_output(0, x);
  if (output_used(1)) {
    // In inference the mask keeps everything: BOOL from opset 10, x's type before.
    const Value keep = scalar(1, opset_ >= 10 ? DType::kBool : x.type().dtype);
    set_output(1, emit("broadcast_to", {keep}, {{"shape", shape_of(x)}}));
  }
}

// From opset 11 the bounds are optional inputs, an absent one leaving its side open. Before, they
// are float attributes whose defaults are float's range (so an infinity clips to it, as in ONNX
// Runtime's Clip-6).
void Importer::convert_clip() {
  Value x = input(0);
  if (opset_ < 11) {
    require_float(x, "x");
    const DType t = x.type().dtype;
    const Value lo = scalar(attr_float("min", std::numeric_limits<float>::lowest()), t);
    const Value hi = scalar(attr_float("max", std::numeric_limits<float>::max()), t);
    set_output(0, emit("clip", {x, lo, hi}));
    return;
  }
  MF_CHECK(!has_attr("min") && !has_attr("max"), InvalidArgument, describe(),
           ": from opset 11 min and max are inputs 1 and 2, not attributes; the node is malformed");
  // Both bounds: one clip op (one pass op by op); one bound: the op for that side.
  if (has_input(1) && has_input(2)) {
    set_output(0, emit("clip", {x, input(1), input(2)}));
    return;
  }
  if (has_input(1)) x = emit("maximum", {x, input(1)});
  if (has_input(2)) x = emit("minimum", {x, input(2)});
  set_output(0, x);
}

void Importer::convert_leaky_relu() {
  Value x = input(0);
  const DType t = x.type().dtype;
  const Value negative = emit("less", {x, scalar(0, t)});
  const Value scaled = emit("mul", {x, scalar(attr_float("alpha", 0.01), t)});
  set_output(0, emit("select", {negative, scaled, x}));
}

void Importer::convert_prelu() {
  Value x = input(0), slope = input(1);
  const Value negative = emit("less", {x, scalar(0, x.type().dtype)});
  Value scaled = emit("mul", {x, slope});
  if (shape_of(scaled) != shape_of(x)) unsupported("slope does not broadcast to x's shape");
  set_output(0, emit("select", {negative, scaled, x}));
}

void Importer::convert_elu() {
  Value x = input(0);
  require_float(x, "x");
  const DType t = x.type().dtype;
  const Value negative = emit("less", {x, scalar(0, t)});
  const Value em1 = emit("sub", {emit("exp", {x}), scalar(1, t)});
  const Value scaled = emit("mul", {em1, scalar(attr_float("alpha", 1.0), t)});
  set_output(0, emit("select", {negative, scaled, x}));
}

void Importer::convert_hard_sigmoid() {
  Value x = input(0);
  const DType t = x.type().dtype;
  Value y = emit("add", {emit("mul", {x, scalar(attr_float("alpha", 0.2), t)}),
                         scalar(attr_float("beta", 0.5), t)});
  y = emit("minimum", {emit("maximum", {y, scalar(0, t)}), scalar(1, t)});
  set_output(0, y);
}

void Importer::convert_hard_swish() {
  Value x = input(0);
  const DType t = x.type().dtype;
  Value y = emit("add", {emit("mul", {x, scalar(1.0 / 6.0, t)}), scalar(0.5, t)});
  y = emit("minimum", {emit("maximum", {y, scalar(0, t)}), scalar(1, t)});
  set_output(0, emit("mul", {x, y}));
}

void Importer::convert_softplus() {
  Value x = input(0);
  require_float(x, "x");
  set_output(0, emit("log", {emit("add", {emit("exp", {x}), scalar(1, x.type().dtype)})}));
}

void Importer::convert_softsign() {
  Value x = input(0);
  require_float(x, "x");
  const Value denominator = emit("add", {emit("abs", {x}), scalar(1, x.type().dtype)});
  set_output(0, emit("div", {x, denominator}));
}

// max(0, x) + min(0, alpha (exp(x / alpha) - 1)): x where x > 0 (the exponential term is then
// positive, for either sign of alpha), alpha (exp(x / alpha) - 1) elsewhere (then it is not).
void Importer::convert_celu() {
  MF_CHECK(opset_ >= 12, InvalidArgument, describe(),
           ": Celu exists from opset 12 on; the node is malformed");
  Value x = input(0);
  require_float(x, "x");
  const DType t = x.type().dtype;
  const Value alpha = scalar(attr_float("alpha", 1.0), t);
  const Value em1 = emit("sub", {emit("exp", {emit("div", {x, alpha})}), scalar(1, t)});
  const Value positive = emit("greater", {x, scalar(0, t)});
  set_output(0, emit("select", {positive, x, emit("mul", {alpha, em1})}));
}

// x where x > alpha, else 0 (NaN included).
void Importer::convert_thresholded_relu() {
  MF_CHECK(opset_ >= 10, InvalidArgument, describe(),
           ": ThresholdedRelu exists from opset 10 on; the node is malformed");
  Value x = input(0);
  require_float(x, "x");
  const DType t = x.type().dtype;
  const Value above = emit("greater", {x, scalar(attr_float("alpha", 1.0), t)});
  set_output(0, emit("select", {above, x, scalar(0, t)}));
}

// x + bias below -lambd, x - bias above lambd, 0 between (and for NaN). On integers lambd and bias
// are truncated toward zero, which leaves the comparisons exact for lambd >= 0.
void Importer::convert_shrink() {
  MF_CHECK(opset_ >= 9, InvalidArgument, describe(),
           ": Shrink exists from opset 9 on; the node is malformed");
  Value x = input(0);
  const DType t = x.type().dtype;
  const double lambd = attr_float("lambd", 0.5);
  const double bias = attr_float("bias", 0.0);
  const Value below = emit("less", {x, scalar(-lambd, t)});
  const Value above = emit("greater", {x, scalar(lambd, t)});
  const Value upper = emit("select", {above, emit("sub", {x, scalar(bias, t)}), scalar(0, t)});
  set_output(0, emit("select", {below, emit("add", {x, scalar(bias, t)}), upper}));
}

// gamma * x for x > 0, gamma * alpha * (exp(x) - 1) otherwise.
void Importer::convert_selu() {
  Value x = input(0);
  require_float(x, "x");
  const DType t = x.type().dtype;
  const double alpha = attr_float("alpha", 1.67326319217681884765625);
  const double gamma = attr_float("gamma", 1.05070102214813232421875);
  const Value positive = emit("greater", {x, scalar(0, t)});
  const Value em1 = emit("sub", {emit("exp", {x}), scalar(1, t)});
  const Value negative_part = emit("mul", {em1, scalar(alpha * gamma, t)});
  const Value positive_part = emit("mul", {x, scalar(gamma, t)});
  set_output(0, emit("select", {positive, positive_part, negative_part}));
}

// One sign only: a comparison with that infinity; neither: all false.
void Importer::convert_is_inf() {
  Value x = input(0);
  require_float(x, "x");
  const bool positive = attr_int("detect_positive", 1) != 0;
  const bool negative = attr_int("detect_negative", 1) != 0;
  const DType t = x.type().dtype;
  const double inf = std::numeric_limits<double>::infinity();
  if (positive && negative) {
    set_output(0, emit("isinf", {x}));
  } else if (positive || negative) {
    set_output(0, emit("equal", {x, scalar(positive ? inf : -inf, t)}));
  } else {
    set_output(0, emit("broadcast_to", {scalar(0, DType::kBool)}, {{"shape", shape_of(x)}}));
  }
}

void Importer::convert_reciprocal() {
  Value x = input(0);
  set_output(0, emit("div", {scalar(1, x.type().dtype), x}));
}

void Importer::convert_where() {
  set_output(0, emit("select", {input(0), input(1), input(2)}));
}

void Importer::convert_cast() {
  Value x = input(0);
  const int64_t to = attr_int("to", 0);
  const std::optional<DType> dtype = to_dtype(int32_t(to));
  if (!dtype) unsupported("cast to " + onnx_type_name(int32_t(to)) + "; " + kSupportedTypes);
  if (*dtype == x.type().dtype) {
    set_output(0, x);
    return;
  }
  set_output(0, emit("cast", {x}, {{"dtype", *dtype}}));
}

// Cast to the element type of input 1, whose values are never read: a known one (an initializer)
// stays out of the graph.
void Importer::convert_cast_like() {
  MF_CHECK(opset_ >= 15, InvalidArgument, describe(),
           ": CastLike exists from opset 15 on; the node is malformed");
  Value x = input(0);
  const std::optional<HostTensor> like = known(1);
  const DType dtype = like ? like->type.dtype : input(1).type().dtype;
  if (dtype == x.type().dtype) {
    set_output(0, x);
    return;
  }
  set_output(0, emit("cast", {x}, {{"dtype", dtype}}));
}

}  // namespace mf::onnx::detail
