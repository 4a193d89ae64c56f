#pragma once
// Helpers for the scalar references: plain loops in double precision, kept independent of the
// kernels (no Eigen, no strided.h) so a bug in one cannot hide in the other.

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "ir/op_def.h"

namespace mf::runtime::ops {

using ir::RefTensor;

// Each of `rows` consecutive rows of `width` values normalized in place to mean 0 and variance 1
// (the biased variance, plus epsilon under the square root), in double: the normalization ops'
// references (layer_norm over rows, instance_norm over planes) apply their own scale and shift.
inline void ref_normalize_rows(std::vector<double>& values, int64_t rows, int64_t width,
                               double epsilon) {
  for (int64_t r = 0; r < rows && width > 0; ++r) {
    double* row = values.data() + r * width;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < width; ++i) mean += row[i];
    mean /= width;
    for (int64_t i = 0; i < width; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= width;
    for (int64_t i = 0; i < width; ++i) row[i] = (row[i] - mean) / std::sqrt(var + epsilon);
  }
}

inline RefTensor ref_tensor(ir::Shape shape, double fill = 0.0) {
  RefTensor t;
  t.values.assign(ir::num_elements(shape), fill);
  t.shape = std::move(shape);
  return t;
}

// Row-major coordinates of a linear index, and back.
inline std::vector<int64_t> ref_unravel(int64_t index, const ir::Shape& shape) {
  std::vector<int64_t> coord(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coord[d] = index % shape[d];
    index /= shape[d];
  }
  return coord;
}

inline int64_t ref_ravel(const std::vector<int64_t>& coord, const ir::Shape& shape) {
  int64_t index = 0;
  for (size_t d = 0; d < shape.size(); ++d) index = index * shape[d] + coord[d];
  return index;
}

// The value of `t` at output coordinate `coord` under numpy broadcasting (coord has out's rank).
inline double ref_broadcast_at(const RefTensor& t, const std::vector<int64_t>& coord) {
  const size_t lead = coord.size() - t.shape.size();
  int64_t index = 0;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    index = index * t.shape[d] + (t.shape[d] == 1 ? 0 : coord[lead + d]);
  }
  return t.values[index];
}

inline ir::Shape ref_broadcast_shape(std::span<const RefTensor> inputs) {
  size_t rank = 0;
  for (const RefTensor& t : inputs) rank = std::max(rank, t.shape.size());
  ir::Shape out(rank, 1);
  for (const RefTensor& t : inputs) {
    for (size_t d = 0; d < t.shape.size(); ++d) {
      int64_t& o = out[rank - t.shape.size() + d];
      if (t.shape[d] != 1) o = t.shape[d];
    }
  }
  return out;
}

// An elementwise reference over broadcast inputs: f receives one double per input.
inline ir::ReferenceFn ref_elementwise(std::function<double(std::span<const double>)> f) {
  return [f = std::move(f)](std::span<const RefTensor> inputs, const ir::Attrs&) {
    const ir::Shape shape = ref_broadcast_shape(inputs);
    RefTensor out = ref_tensor(shape);
    std::vector<double> args(inputs.size());
    for (int64_t i = 0; i < static_cast<int64_t>(out.values.size()); ++i) {
      const std::vector<int64_t> coord = ref_unravel(i, shape);
      for (size_t k = 0; k < inputs.size(); ++k) args[k] = ref_broadcast_at(inputs[k], coord);
      out.values[i] = f(args);
    }
    return std::vector<RefTensor>{std::move(out)};
  };
}

inline ir::ReferenceFn ref_unary(double (*f)(double)) {
  return ref_elementwise([f](std::span<const double> a) { return f(a[0]); });
}

inline ir::ReferenceFn ref_binary(double (*f)(double, double)) {
  return ref_elementwise([f](std::span<const double> a) { return f(a[0], a[1]); });
}

}  // namespace mf::runtime::ops
