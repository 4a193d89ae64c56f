#pragma once
// What composite ops' expanders share: building basic ops just before the composite node, with its
// scope and location, and scalar constants of the node's dtype. Expanders mirror their kernel's
// expression tree operation by operation, so that (for the shapes they accept with bit_exact) the
// expansion computes the same bits as the composite kernel.

#include <string_view>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace mf::runtime::ops {

// Inserts the nodes of one expansion before the composite node `node` of `graph`.
// Promise: every node it adds carries the composite's scope and location.
class Expansion {
 public:
  Expansion(ir::Graph& graph, ir::Node& node) : graph_(graph), node_(node) {}

  ir::Value input(size_t i) const { return node_.input(i); }
  const ir::TensorType& input_type(size_t i) const { return node_.input(i).type(); }
  const ir::Attrs& attrs() const { return node_.attrs(); }

  ir::Value op(std::string_view name, std::vector<ir::Value> inputs, ir::Attrs attrs = {}) {
    return graph_.insert_node(&node_, name, std::move(inputs), std::move(attrs), node_.info())
        ->output(0);
  }

  // A scalar constant of `dtype` (Float32 or Float64), rounded as the kernels round T(value).
  ir::Value scalar(double value, ir::DType dtype) {
    if (dtype == ir::DType::kFloat64) return graph_.add_constant<double>({}, {value});
    return graph_.add_constant<float>({}, {static_cast<float>(value)});
  }

  // `value` (shape (C)) reshaped to (C, 1, ..., 1) so it broadcasts along axis `axis` of a tensor
  // of rank `rank`; unchanged when the axis is the last.
  ir::Value along_axis(ir::Value value, int64_t axis, int64_t rank) {
    if (axis == rank - 1) return value;
    std::vector<int64_t> shape(static_cast<size_t>(rank - axis), 1);
    shape[0] = value.type().shape[0];
    return op("reshape", {value}, {{"shape", shape}});
  }

 private:
  ir::Graph& graph_;
  ir::Node& node_;
};

// Reduce attributes over `axes`, keeping them as size 1 so the result broadcasts back over rows.
inline ir::Attrs keep_axes(std::vector<int64_t> axes) {
  return {{"axes", std::move(axes)}, {"keep_dims", true}};
}

}  // namespace mf::runtime::ops
