// ONNX import: reductions (ReduceSum, ReduceMean, ReduceProd, ... ReduceLogSumExp).

#include "engine/io/onnx/importer_impl.h"

#include <string>
#include <vector>

#include "base/error.h"

namespace mf::onnx::detail {

void Importer::add_reduce_converters(ConverterTable& table) {
  add_converters(table, {
                            {"ReduceL1", &Importer::convert_reduce},
                            {"ReduceL2", &Importer::convert_reduce},
                            {"ReduceLogSum", &Importer::convert_reduce},
                            {"ReduceLogSumExp", &Importer::convert_reduce},
                            {"ReduceMax", &Importer::convert_reduce},
                            {"ReduceMean", &Importer::convert_reduce},
                            {"ReduceMin", &Importer::convert_reduce},
                            {"ReduceProd", &Importer::convert_reduce},
                            {"ReduceSum", &Importer::convert_reduce},
                            {"ReduceSumSquare", &Importer::convert_reduce},
                        });
}

void Importer::convert_reduce() {
  const std::string& op = node_->op_type();
  Value x = input(0);
  // The axes are an attribute until ReduceSum-13 and the others' opset 18, then an optional input
  // beside noop_with_empty_axes (no axes then mean the identity instead of every axis).
  const bool axes_are_input = opset_ >= (op == "ReduceSum" ? 13 : 18);
  std::vector<int64_t> axes;
  if (axes_are_input) {
    MF_CHECK(!has_attr("axes"), InvalidArgument, describe(), ": from opset ",
             op == "ReduceSum" ? 13 : 18,
             " axes is input 1, not an attribute; the node is malformed");
    if (has_input(1)) axes = known_ints(1, "axes");
  } else {
    axes = attr_ints("axes", {});
  }
  const bool keep_dims = attr_int("keepdims", 1) != 0;
  if (axes.empty() && axes_are_input && attr_int("noop_with_empty_axes", 0) != 0) {
    set_output(0, x);
    return;
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < rank_of(x); ++d) axes.push_back(d);
  }
  const ir::Attrs attrs = {{"axes", axes}, {"keep_dims", keep_dims}};
  Value y;
  if (op == "ReduceMean") {
    y = emit("reduce_mean", {x}, attrs);
  } else if (op == "ReduceSum") {
    y = emit("reduce_sum", {x}, attrs);
  } else if (op == "ReduceMax") {
    y = emit("reduce_max", {x}, attrs);
  } else if (op == "ReduceMin") {
    y = emit("reduce_min", {x}, attrs);
  } else if (op == "ReduceProd") {
    y = emit("reduce_prod", {x}, attrs);
  } else if (op == "ReduceSumSquare") {
    y = emit("reduce_sum", {emit("mul", {x, x})}, attrs);
  } else if (op == "ReduceL1") {
    y = emit("reduce_sum", {emit("abs", {x})}, attrs);
  } else if (op == "ReduceL2") {
    require_float(x, "x");
    y = emit("sqrt", {emit("reduce_sum", {emit("mul", {x, x})}, attrs)});
  } else if (op == "ReduceLogSum") {
    require_float(x, "x");
    y = emit("log", {emit("reduce_sum", {x}, attrs)});
  } else {  // ReduceLogSumExp, stabilized by the maximum
    require_float(x, "x");
    ir::Attrs kept = attrs;
    kept["keep_dims"] = true;
    const Value m = emit("reduce_max", {x}, kept);
    Value s = emit("reduce_sum", {emit("exp", {emit("sub", {x, m})})}, kept);
    y = emit("add", {emit("log", {s}), m});
    if (!keep_dims) y = emit("squeeze", {y}, {{"axes", axes}});
  }
  set_output(0, y);
}

}  // namespace mf::onnx::detail
