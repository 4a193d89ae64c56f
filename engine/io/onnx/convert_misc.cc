// ONNX import: ops on index tensors (GatherElements, GatherND, Scatter, ScatterElements,
// ScatterND), ranking (TopK, Hardmax) and the (N, C, ...) normalizations InstanceNormalization and
// LRN. Within opsets 7 to 18 these changed as follows, each read as the model's opset defines it:
// TopK's k is an attribute to opset 9 and an input from 10 (which must be known while importing),
// with largest and sorted from 11; Hardmax works on the 2-D flattening at axis (default 1) to opset
// 12 and on axis (default -1) from 13; the scatters' reduction exists from 16 (add, mul) and 18
// (max, min); GatherND's batch_dims from 12; Scatter (opset 9 on, deprecated from 11) is
// ScatterElements without reduction. The index ops exist from opset 11, Scatter from 9.

#include "engine/io/onnx/importer_impl.h"

#include <string>
#include <vector>

#include "base/error.h"

namespace mf::onnx::detail {

namespace {

// The opset that introduced a scatter reduction; 0 for "none" and for names no opset has (the op
// refuses those, naming the ones it takes).
int64_t reduction_since(const std::string& reduction) {
  if (reduction == "add" || reduction == "mul") return 16;
  if (reduction == "max" || reduction == "min") return 18;
  return 0;
}

}  // namespace

void Importer::add_misc_converters(ConverterTable& table) {
  add_converters(table, {
                            {"GatherElements", &Importer::convert_gather_elements},
                            {"GatherND", &Importer::convert_gather_nd},
                            {"Hardmax", &Importer::convert_hardmax},
                            {"InstanceNormalization", &Importer::convert_instance_norm},
                            {"LRN", &Importer::convert_lrn},
                            {"Scatter", &Importer::convert_scatter_elements},
                            {"ScatterElements", &Importer::convert_scatter_elements},
                            {"ScatterND", &Importer::convert_scatter_nd},
                            {"TopK", &Importer::convert_top_k},
                        });
}

void Importer::convert_gather_elements() {
  MF_CHECK(opset_ >= 11, InvalidArgument, describe(),
           ": GatherElements exists from opset 11 on; the node is malformed");
  Value data = input(0);
  Value indices = input(1);
  set_output(0, emit("gather_elements", {data, indices}, {{"axis", attr_int("axis", 0)}}));
}

void Importer::convert_gather_nd() {
  MF_CHECK(opset_ >= 11, InvalidArgument, describe(),
           ": GatherND exists from opset 11 on; the node is malformed");
  Value data = input(0);
  Value indices = input(1);
  const int64_t batch_dims = attr_int("batch_dims", 0);
  MF_CHECK(opset_ >= 12 || batch_dims == 0, InvalidArgument, describe(),
           ": batch_dims exists from opset 12 on; the node is malformed");
  set_output(0, emit("gather_nd", {data, indices}, {{"batch_dims", batch_dims}}));
}

// Scatter (opset 9 to 10, deprecated after) and ScatterElements (from 11): the same op.
void Importer::convert_scatter_elements() {
  const bool old = node_->op_type() == "Scatter";
  MF_CHECK(opset_ >= (old ? 9 : 11), InvalidArgument, describe(), ": ", node_->op_type(),
           " exists from opset ", old ? 9 : 11, " on; the node is malformed");
  MF_CHECK(!old || !has_attr("reduction"), InvalidArgument, describe(),
           ": Scatter has no reduction attribute (ScatterElements has, from opset 16); the node is "
           "malformed");
  Value data = input(0);
  Value indices = input(1);
  Value updates = input(2);
  const std::string reduction = attr_string("reduction", "none");
  MF_CHECK(opset_ >= reduction_since(reduction), InvalidArgument, describe(), ": reduction '",
           echo(reduction, 40), "' exists from opset ", reduction_since(reduction),
           " on; the node is malformed");
  set_output(0, emit("scatter_elements", {data, indices, updates},
                     {{"axis", attr_int("axis", 0)}, {"reduction", reduction}}));
}

void Importer::convert_scatter_nd() {
  MF_CHECK(opset_ >= 11, InvalidArgument, describe(),
           ": ScatterND exists from opset 11 on; the node is malformed");
  Value data = input(0);
  Value indices = input(1);
  Value updates = input(2);
  const std::string reduction = attr_string("reduction", "none");
  MF_CHECK(opset_ >= reduction_since(reduction), InvalidArgument, describe(), ": reduction '",
           echo(reduction, 40), "' exists from opset ", reduction_since(reduction),
           " on; the node is malformed");
  set_output(0, emit("scatter_nd", {data, indices, updates}, {{"reduction", reduction}}));
}

void Importer::convert_top_k() {
  Value x = input(0);
  int64_t k = 0;
  if (opset_ < 10) {
    // One input only: a second one is refused as unread by convert_node.
    MF_CHECK(has_attr("k"), InvalidArgument, describe(),
             " has no k attribute (TopK takes k as an attribute to opset 9)");
    k = attr_int("k", 0);
  } else {
    MF_CHECK(!has_attr("k"), InvalidArgument, describe(),
             ": from opset 10 k is input 1, not an attribute; the node is malformed");
    // k decides the output shape, so it must be known.
    const std::vector<int64_t> ks = known_ints(1, "k");
    MF_CHECK(ks.size() == 1, InvalidArgument, describe(), ": k must hold one value, got ",
             ks.size());
    k = ks[0];
  }
  const std::vector<Value> outs = emit_all("top_k", {x},
                                           {{"k", k},
                                            {"axis", attr_int("axis", -1)},
                                            {"largest", attr_int("largest", 1) != 0},
                                            {"sorted", attr_int("sorted", 1) != 0}});
  set_output(0, outs.at(0));
  set_output(1, outs.at(1));
}

void Importer::convert_hardmax() {
  Value x = input(0);
  const int64_t rank = rank_of(x);
  if (rank == 0) unsupported("x must have rank >= 1");
  if (opset_ >= 13) {
    set_output(0, emit("hardmax", {x}, {{"axis", axis_attr("axis", -1, rank)}}));
    return;
  }
  // Before opset 13 the input is coerced to 2-D at axis, and the one-hot spans the whole tail.
  const int64_t axis = axis_attr("axis", 1, rank);
  if (axis == rank - 1) {
    set_output(0, emit("hardmax", {x}, {{"axis", int64_t{-1}}}));
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= shape_of(x)[d];
  const Shape original = shape_of(x);
  const Value y = emit("hardmax", {reshape(x, {outer, inner})}, {{"axis", int64_t{-1}}});
  set_output(0, reshape(y, original));
}

void Importer::convert_instance_norm() {
  Value x = input(0);
  require_float(x, "x");
  Value scale = input(1);
  Value bias = input(2);
  set_output(0,
             emit("instance_norm", {x, scale, bias}, {{"epsilon", attr_float("epsilon", 1e-5)}}));
}

void Importer::convert_lrn() {
  Value x = input(0);
  require_float(x, "x");
  MF_CHECK(has_attr("size"), InvalidArgument, describe(), " has no size attribute");
  set_output(0, emit("lrn", {x},
                     {{"size", attr_int("size", 0)},
                      {"alpha", attr_float("alpha", 1e-4)},
                      {"beta", attr_float("beta", 0.75)},
                      {"bias", attr_float("bias", 1.0)}}));
}

}  // namespace mf::onnx::detail
