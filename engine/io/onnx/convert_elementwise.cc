// ONNX import: elementwise ops, activations and casts.

#include "engine/io/onnx/importer_impl.h"

#include <map>
#include <string>

#include "base/error.h"

namespace mf::onnx::detail {

void Importer::add_elementwise_converters(ConverterTable& table) {
  add_converters(table, {
                            {"Abs", &Importer::convert_unary},
                            {"Add", &Importer::convert_binary},
                            {"Cast", &Importer::convert_cast},
                            {"Clip", &Importer::convert_clip},
                            {"Div", &Importer::convert_binary},
                            {"Dropout", &Importer::convert_dropout},
                            {"Elu", &Importer::convert_elu},
                            {"Equal", &Importer::convert_binary},
                            {"Erf", &Importer::convert_unary},
                            {"Exp", &Importer::convert_unary},
                            {"Greater", &Importer::convert_binary},
                            {"HardSigmoid", &Importer::convert_hard_sigmoid},
                            {"HardSwish", &Importer::convert_hard_swish},
                            {"Identity", &Importer::convert_identity},
                            {"LeakyRelu", &Importer::convert_leaky_relu},
                            {"Less", &Importer::convert_binary},
                            {"Log", &Importer::convert_unary},
                            {"Max", &Importer::convert_variadic},
                            {"Mean", &Importer::convert_variadic},
                            {"Min", &Importer::convert_variadic},
                            {"Mul", &Importer::convert_binary},
                            {"Neg", &Importer::convert_unary},
                            {"Pow", &Importer::convert_binary},
                            {"PRelu", &Importer::convert_prelu},
                            {"Reciprocal", &Importer::convert_reciprocal},
                            {"Relu", &Importer::convert_unary},
                            {"Sigmoid", &Importer::convert_unary},
                            {"Softplus", &Importer::convert_softplus},
                            {"Sqrt", &Importer::convert_unary},
                            {"Sub", &Importer::convert_binary},
                            {"Sum", &Importer::convert_variadic},
                            {"Tanh", &Importer::convert_unary},
                            {"Where", &Importer::convert_where},
                        });
}

void Importer::convert_unary() {
  static const std::map<std::string, std::string, std::less<>> ops = {
      {"Abs", "abs"},   {"Erf", "erf"},         {"Exp", "exp"},   {"Log", "log"},   {"Neg", "neg"},
      {"Relu", "relu"}, {"Sigmoid", "sigmoid"}, {"Sqrt", "sqrt"}, {"Tanh", "tanh"},
  };
  set_output(0, emit(ops.at(node_->op_type()), {input(0)}));
}

void Importer::convert_binary() {
  static const std::map<std::string, std::string, std::less<>> ops = {
      {"Add", "add"}, {"Sub", "sub"},     {"Mul", "mul"},   {"Div", "div"},
      {"Pow", "pow"}, {"Equal", "equal"}, {"Less", "less"}, {"Greater", "greater"},
  };
  Value a = input(0), b = input(1);
  if (node_->op_type() == "Pow" && !ir::is_floating(a.type().dtype)) {
    unsupported(
        "an integer base is not supported (pow is computed in floating point); cast the "
        "base to float before export");
  }
  // Pow alone lets the exponent's type differ from the base's; the IR wants one dtype.
  if (node_->op_type() == "Pow" && b.type().dtype != a.type().dtype) {
    b = emit("cast", {b}, {{"dtype", a.type().dtype}});
  }
  set_output(0, emit(ops.at(node_->op_type()), {a, b}));
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

void Importer::convert_dropout() {
  if (std::optional<HostTensor> training = known(2); training && training->size() == 1) {
    if (training->at(0) != 0) unsupported("training_mode is true; export the model in eval mode");
  } else if (has_input(2)) {
    unsupported("training_mode is not a constant; export the model in eval mode");
  }
  Value x = input(0);
  set_output(0, x);
  if (output_used(1)) {
    // In inference the mask keeps everything.
    set_output(1, emit("broadcast_to", {scalar(1, DType::kBool)}, {{"shape", shape_of(x)}}));
  }
}

void Importer::convert_clip() {
  Value x = input(0);
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

}  // namespace mf::onnx::detail
