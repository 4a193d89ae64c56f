// Opsets 1 to 6 of the default domain. The converters are written for opset 7 on; an older node is
// rewritten here into its opset-7 form, or refused when its meaning changed in a way that has no
// opset-7 form. What changed before opset 7:
//  - the binary ops broadcast only with `broadcast=1`, aligning B to A from `axis` (numpy aligns
//    from the right: B gets trailing 1s); without it both shapes are equal, where numpy agrees;
//  - Reshape's shape was an attribute (before 5), Cast's `to` a type name (before 6), Concat's
//    axis defaulted to 1 (before 4), Pad's pads were `paddings` (opset 1);
//  - `consumed_inputs` and `is_test` were hints about memory and training: ignored, as an
//    inference runtime does (Dropout is the identity either way);
//  - Tile (before 6), Upsample (before 7) and Split with a second input (opset 1) had other
//    inputs or attributes: refused, with the way to upgrade the model.
// Ops not listed in kUnchangedSinceOpset1 or adapted below are refused at these opsets, since no
// converter has been checked against their first versions.

#include <set>
#include <string>

#include "base/error.h"
#include "engine/io/onnx/importer_impl.h"

namespace mf::onnx::detail {
namespace {

// Ops whose versions 1-6 mean what the converters read as their opset-7 version (attributes they
// add later have defaults that give the old behaviour).
const std::set<std::string, std::less<>> kUnchangedSinceOpset1 = {"Abs",
                                                                  "ArgMax",
                                                                  "ArgMin",
                                                                  "AveragePool",
                                                                  "BatchNormalization",
                                                                  "Ceil",
                                                                  "Clip",
                                                                  "Constant",
                                                                  "Conv",
                                                                  "DepthToSpace",
                                                                  "Dropout",
                                                                  "Elu",
                                                                  "Exp",
                                                                  "Flatten",
                                                                  "Floor",
                                                                  "Gather",
                                                                  "Gemm",
                                                                  "GlobalAveragePool",
                                                                  "GlobalMaxPool",
                                                                  "HardSigmoid",
                                                                  "Hardmax",
                                                                  "Identity",
                                                                  "InstanceNormalization",
                                                                  "LRN",
                                                                  "LeakyRelu",
                                                                  "Log",
                                                                  "LogSoftmax",
                                                                  "MatMul",
                                                                  "Max",
                                                                  "MaxPool",
                                                                  "Mean",
                                                                  "Min",
                                                                  "Neg",
                                                                  "Not",
                                                                  "PRelu",
                                                                  "Reciprocal",
                                                                  "ReduceL1",
                                                                  "ReduceL2",
                                                                  "ReduceLogSum",
                                                                  "ReduceLogSumExp",
                                                                  "ReduceMax",
                                                                  "ReduceMean",
                                                                  "ReduceMin",
                                                                  "ReduceProd",
                                                                  "ReduceSum",
                                                                  "ReduceSumSquare",
                                                                  "Relu",
                                                                  "Selu",
                                                                  "Shape",
                                                                  "Sigmoid",
                                                                  "Size",
                                                                  "Slice",
                                                                  "Softmax",
                                                                  "Softplus",
                                                                  "Softsign",
                                                                  "SpaceToDepth",
                                                                  "Split",
                                                                  "Sqrt",
                                                                  "Squeeze",
                                                                  "Sum",
                                                                  "Tanh",
                                                                  "TopK",
                                                                  "Transpose",
                                                                  "Unsqueeze"};

// The binary ops that took `broadcast` and `axis` before opset 7.
const std::set<std::string, std::less<>> kLegacyBroadcast = {
    "Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"};

AttributeProto int_attr(const std::string& name, int64_t value) {
  AttributeProto a;
  a.set_name(name);
  a.set_type(AttributeProto::INT);
  a.set_i(value);
  return a;
}

}  // namespace

std::string Importer::synthetic_value(Value v) {
  // A name no ONNX value has: the prefix is a byte the IR names never use, and a clash with a
  // hostile model's names is skipped.
  std::string name;
  do {
    name = "\x01legacy." + std::to_string(synthetic_values_++);
  } while (values_.count(name) || initializers_.count(name));
  values_.emplace(name, v);
  return name;
}

NodeProto Importer::adapt_legacy_node(const NodeProto& node) {
  const std::string& op = node.op_type();
  const std::string upgrade =
      "; upgrade the model with onnx.version_converter.convert_version(model, " +
      std::to_string(kMaxOpset) + ")";
  NodeProto out = node;
  // Hints with no meaning for inference.
  out.clear_attribute();
  for (const AttributeProto& a : node.attribute()) {
    if (a.name() != "consumed_inputs" && a.name() != "is_test") *out.add_attribute() = a;
  }
  if (kLegacyBroadcast.count(op)) {
    const int64_t broadcast = attr_int("broadcast", 0);
    if (broadcast != 0 && has_attr("axis") && node.input_size() == 2) {
      // B aligned to A from `axis`: numpy aligns from the right, so B gets trailing 1s.
      Value a = input(0), b = input(1);
      const int64_t axis =
          attr_int("axis", 0) < 0 ? attr_int("axis", 0) + rank_of(a) : attr_int("axis", 0);
      MF_CHECK(axis >= 0 && axis + rank_of(b) <= rank_of(a), InvalidArgument, describe(),
               ": broadcast axis ", attr_int("axis", 0), " does not fit B ",
               ir::shape_to_string(shape_of(b)), " into A ", ir::shape_to_string(shape_of(a)));
      Shape aligned = shape_of(b);
      aligned.resize(size_t(rank_of(a) - axis), 1);
      out.set_input(1, synthetic_value(emit("reshape", {b}, {{"shape", aligned}})));
    }
    out.clear_attribute();
    return out;
  }
  if (op == "Reshape" && opset_ < 5) {
    const std::vector<int64_t> shape = attr_ints("shape", {});
    MF_CHECK(has_attr("shape"), InvalidArgument, describe(), " has no `shape` attribute");
    out.clear_attribute();
    out.add_input(synthetic_value(
        graph_->add_constant<int64_t>({int64_t(shape.size())}, std::vector<int64_t>(shape))));
    return out;
  }
  if (op == "Reshape") return out;
  if (op == "Cast" && opset_ < 6) {
    const std::string to = attr_string("to", "");
    TensorProto::DataType type{};
    if (!TensorProto::DataType_Parse(to, &type)) {
      MF_FAIL(InvalidArgument, describe(), ": Cast to '", echo(to, 40),
              "', which is not an ONNX type name (FLOAT, INT64, ...)");
    }
    out.clear_attribute();
    *out.add_attribute() = int_attr("to", type);
    return out;
  }
  if (op == "Cast") return out;
  if (op == "Concat") {
    if (opset_ < 4 && !has_attr("axis")) *out.add_attribute() = int_attr("axis", 1);
    return out;
  }
  if (op == "Pad") {
    if (opset_ < 2) {
      for (AttributeProto& a : *out.mutable_attribute()) {
        if (a.name() == "paddings") a.set_name("pads");
      }
    }
    return out;
  }
  if (op == "Split" && node.input_size() > 1) {
    unsupported("a Split whose sizes are its second input (opset 1) is not read" + upgrade);
  }
  if (op == "Tile" && opset_ < 6) unsupported("Tile before opset 6 (tiles and axis)" + upgrade);
  if (op == "Upsample")
    unsupported("Upsample before opset 7 (width_scale, height_scale)" + upgrade);
  if (kUnchangedSinceOpset1.count(op)) {
    if (op == "BatchNormalization" && attr_int("spatial", 1) != 1) {
      unsupported("BatchNormalization with spatial=0 (per-element statistics)" + upgrade);
    }
    return out;
  }
  unsupported("the importer reads " + echo(op, 80) + " from opset 7 on (opset " +
              std::to_string(opset_) + " here)" + upgrade);
}

}  // namespace mf::onnx::detail
