#pragma once
// What backward rules share: the chain rule of a one-input op, sums over axes that tolerate an
// empty axis list (reduce ops read [] as "all"), and the attributes rules pass to shape ops. Rules
// see values only through ir::GradBuilder, so everything here emits registry ops by name.

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "ir/grad_builder.h"
#include "ir/op_def.h"

namespace mf::runtime::ops {

// A rank-0 constant of input i's dtype.
inline ir::GradValue scalar_like(ir::GradBuilder& b, double value, size_t i = 0) {
  return b.scalar(value, b.input_type(i).dtype);
}

inline std::vector<int64_t> dims_of(const ir::Shape& shape) {
  return std::vector<int64_t>(shape.begin(), shape.end());
}

// The gradient of a one-input op: dout times the local derivative `derivative(b)`, built only when
// the input wants a gradient.
inline ir::BackwardFn chain_rule(std::function<ir::GradValue(ir::GradBuilder&)> derivative) {
  return [derivative = std::move(derivative)](ir::GradBuilder& b) {
    if (!b.wants_grad(0)) return;
    b.set_grad(0, b.op("mul", {b.dout(0), derivative(b)}));
  };
}

// `g` summed over `axes` (none: `g` itself, never the whole tensor as reduce_sum reads []).
inline ir::GradValue sum_over(ir::GradBuilder& b, ir::GradValue g, std::vector<int64_t> axes,
                              bool keep_dims) {
  if (axes.empty()) return g;
  return b.op("reduce_sum", {g}, {{"axes", std::move(axes)}, {"keep_dims", keep_dims}});
}

inline ir::GradValue reshape_to(ir::GradBuilder& b, ir::GradValue g, const ir::Shape& shape) {
  if (b.type(g).shape == shape) return g;
  return b.op("reshape", {g}, {{"shape", dims_of(shape)}});
}

inline ir::GradValue broadcast_to(ir::GradBuilder& b, ir::GradValue g, const ir::Shape& shape) {
  if (b.type(g).shape == shape) return g;
  return b.op("broadcast_to", {g}, {{"shape", dims_of(shape)}});
}

// The gradient of a view (reshape, flatten, expand_dims, squeeze): dout back in input 0's shape.
inline void view_backward(ir::GradBuilder& b) {
  if (b.wants_grad(0)) b.set_grad(0, reshape_to(b, b.dout(0), b.input_type(0).shape));
}

}  // namespace mf::runtime::ops
