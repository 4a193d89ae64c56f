#pragma once
// Test helpers for op kernels: host tensors built from doubles, and running one op through its
// registry entry (inference, then kernel) the way an executor would.

#include <cstdint>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

#include "base/aligned_allocator.h"
#include "ir/op_def.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops::testing {

// Memory at the alignment the executors give every tensor (kTensorAlignment, 64 bytes): Eigen's
// GEMM picks its vector path by address, so a kernel is reproducible only at that alignment.
template <typename T>
using TensorAligned = AlignedAllocator<T, 64>;

// A tensor of any dtype in host memory aligned as the executors align tensors.
struct HostTensor {
  ir::TensorType type;
  std::vector<uint64_t, TensorAligned<uint64_t>> storage;

  HostTensor() = default;
  explicit HostTensor(ir::TensorType t) : type(std::move(t)) {
    storage.assign((ir::num_elements(type.shape) * ir::dtype_size(type.dtype) + 7) / 8 + 1, 0);
  }
  void* data() { return storage.data(); }
  const void* data() const { return storage.data(); }
  int64_t size() const { return ir::num_elements(type.shape); }
  ir::TensorView view() { return ir::TensorView{data(), type}; }

  // Stores each value as the dtype does (float rounding, int truncation, bool != 0).
  static HostTensor from_doubles(ir::TensorType t, const std::vector<double>& values) {
    HostTensor h(std::move(t));
    for (int64_t i = 0; i < h.size(); ++i) h.set(i, values.at(i));
    return h;
  }
  void set(int64_t i, double v) {
    ir::visit_dtype(type.dtype, [&](auto tag) {
      using T = decltype(tag);
      static_cast<T*>(data())[i] = static_cast<T>(v);
    });
  }
  double get(int64_t i) const {
    return ir::visit_dtype(type.dtype, [&](auto tag) {
      using T = decltype(tag);
      return static_cast<double>(static_cast<const T*>(data())[i]);
    });
  }
  std::vector<double> to_doubles() const {
    std::vector<double> out(size());
    for (int64_t i = 0; i < size(); ++i) out[i] = get(i);
    return out;
  }
  bool same_bytes(const HostTensor& other) const {
    return type == other.type &&
           std::memcmp(data(), other.data(), size() * ir::dtype_size(type.dtype)) == 0;
  }
};

inline HostTensor f32(ir::Shape shape, std::vector<double> values) {
  return HostTensor::from_doubles({ir::DType::kFloat32, std::move(shape)}, values);
}

// Infers output types (filling attribute defaults), allocates outputs and runs the kernel.
inline std::vector<HostTensor> run_op(std::string_view name, std::vector<HostTensor> inputs,
                                      ir::Attrs attrs = {}) {
  const ir::OpDef& op = ir::get_op(name);
  std::vector<ir::TensorType> types;
  for (const HostTensor& t : inputs) types.push_back(t.type);
  const std::vector<ir::TensorType> out_types = op.infer_types(types, attrs);
  std::vector<HostTensor> outputs;
  for (const ir::TensorType& t : out_types) outputs.emplace_back(t);
  std::vector<ir::TensorView> in_views, out_views;
  for (HostTensor& t : inputs) in_views.push_back(t.view());
  for (HostTensor& t : outputs) out_views.push_back(t.view());
  const ir::KernelContext ctx{in_views, out_views, attrs, op.name, true};
  op.kernel(ctx);
  return outputs;
}

// Inputs of `types` with values uniform in [-1, 1) from `seed`.
inline std::vector<HostTensor> random_inputs(const std::vector<ir::TensorType>& types,
                                             uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<HostTensor> out;
  for (const ir::TensorType& t : types) {
    std::vector<double> v(ir::num_elements(t.shape));
    for (double& x : v) x = dist(rng);
    out.push_back(HostTensor::from_doubles(t, v));
  }
  return out;
}

// Runs one op's kernel at `threads` intra-op threads, optionally with prepared state.
inline HostTensor run(std::string_view name, std::vector<HostTensor>& inputs, ir::Attrs attrs,
                      int threads, bool deterministic, const void* prepared = nullptr) {
  const ir::OpDef& op = ir::get_op(name);
  std::vector<ir::TensorType> types;
  for (const HostTensor& t : inputs) types.push_back(t.type);
  const std::vector<ir::TensorType> out_types = op.infer_types(types, attrs);
  HostTensor out(out_types[0]);
  std::vector<ir::TensorView> in_views, out_views{out.view()};
  for (HostTensor& t : inputs) in_views.push_back(t.view());
  ScopedIntraOpThreads scope(threads);
  op.kernel(ir::KernelContext{in_views, out_views, attrs, op.name, deterministic, prepared});
  return out;
}

// conv2d's attributes (the rest default).
inline ir::Attrs conv(std::vector<int64_t> stride, std::vector<int64_t> padding, int64_t groups,
                      std::vector<int64_t> dilation = {1, 1}) {
  return {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}};
}

}  // namespace mf::runtime::ops::testing
