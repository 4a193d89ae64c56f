#include "engine/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/eager/dispatch.h"
#include "engine/eager/eager_layout.h"
#include "engine/eager/pynative_recorder.h"
#include "engine/engine_state.h"
#include "engine/io/npy.h"
#include "runtime/eager_executor.h"

namespace mf {
namespace {

// splitmix64: a tiny, portable generator, so a seed gives the same weights on every platform
// (std::normal_distribution's algorithm is implementation-defined).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1): never 0, so log() below is finite.
  double uniform() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }
};

std::shared_ptr<TensorImpl> allocate_impl(const Shape& shape, DType dtype, std::string_view what) {
  // Negative dimensions, more than kMaxRank axes and more than 2^40 elements are InvalidArgument.
  const size_t bytes = size_t(ir::checked_byte_size(shape, ir::dtype_size(dtype), what));
  auto impl = std::make_shared<TensorImpl>();
  impl->type = {dtype, shape};
  impl->buffer = engine::allocate_tensor_memory(bytes, what);
  return impl;
}

template <typename Fill>
Tensor make_float(const Shape& shape, std::string_view what, Fill fill) {
  Tensor t(allocate_impl(shape, DType::kFloat32, what));
  float* p = static_cast<float*>(t.mutable_raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(fill());
  return t;
}

}  // namespace

const ir::TensorType& Tensor::type() const {
  MF_CHECK(impl_ != nullptr, InvalidArgument,
           "the tensor is undefined (default-constructed); assign it first");
  return impl_->type;
}

void Tensor::sync() const {
  type();
  if (impl_->ready_seq == 0) return;
  engine::with_pynative_recorder(
      [&] { runtime::default_eager_executor().wait_for(impl_->ready_seq); });
}

const void* Tensor::raw_data() const {
  // Channels-last storage (engine/eager/eager_layout.h) is read through its NCHW copy.
  if (type(); impl_->channels_last) return engine::plain_tensor(*this).raw_data();
  sync();
  MF_CHECK(impl_->buffer != nullptr, InvalidArgument,
           "this tensor is symbolic: it was produced while tracing a GRAPH_MODE network, so its "
           "value exists only "
           "when the compiled graph runs; read the network's output instead (or use PYNATIVE_MODE "
           "to inspect it)");
  return impl_->buffer->data();
}

void* Tensor::mutable_raw_data() {
  if (type(); impl_->channels_last) {
    // Writes go to NCHW bytes from now on: the tensor takes its plain copy as its storage once no
    // queued op can still read the channels-last one.
    const Tensor plain = engine::plain_tensor(*this);
    engine::sync();
    impl_->buffer = plain.impl()->buffer;
    impl_->channels_last = false;
    impl_->plain = nullptr;
  }
  sync();
  // Whatever a kernel kept from these bytes (weights reordered for a convolution) is stale once
  // the caller writes them: the new version keys it out.
  impl_->buffer->mark_written();
  return impl_->buffer->data();
}

void Tensor::check_dtype(DType wanted, const char* what) const {
  MF_CHECK(dtype() == wanted, InvalidArgument, what, "<", ir::dtype_name(wanted),
           ">() on a tensor of dtype ", ir::dtype_name(dtype()),
           "; use the matching type or ops::cast first");
}

std::vector<double> Tensor::to_doubles() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  const void* p = raw_data();
  ir::visit_dtype(dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* typed = static_cast<const T*>(p);
    for (size_t i = 0; i < out.size(); ++i) out[i] = double(typed[i]);
  });
  return out;
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  return Tensor(allocate_impl(shape, dtype, "empty"));
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t(allocate_impl(shape, dtype, "full"));
  void* p = t.mutable_raw_data();
  ir::visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    std::fill_n(static_cast<T*>(p), t.numel(), static_cast<T>(value));
  });
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  return full(shape, 0.0, dtype);
}
Tensor Tensor::ones(const Shape& shape, DType dtype) {
  return full(shape, 1.0, dtype);
}

Tensor Tensor::randn(const Shape& shape, uint64_t seed, double stddev) {
  SplitMix64 rng{seed};
  // Box-Muller, one value per pair of uniforms: simple and reproducible.
  return make_float(shape, "randn", [&] {
    const double u1 = rng.uniform(), u2 = rng.uniform();
    return stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  });
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, uint64_t seed) {
  MF_CHECK(low <= high, InvalidArgument, "uniform: low ", low, " is above high ", high);
  SplitMix64 rng{seed};
  return make_float(shape, "uniform", [&] { return low + (high - low) * rng.uniform(); });
}

Tensor Tensor::from_bytes(DType dtype, const Shape& shape, const void* bytes) {
  Tensor t(allocate_impl(shape, dtype, "from_vector"));
  // An empty tensor's bytes may be null (an empty vector's data()): memcpy's may not.
  if (t.nbytes() > 0) std::memcpy(t.mutable_raw_data(), bytes, t.nbytes());
  return t;
}

Tensor Tensor::from_vector(const std::vector<bool>& values, const Shape& shape) {
  MF_CHECK(int64_t(values.size()) == ir::num_elements(shape), InvalidArgument,
           "from_vector: ", values.size(), " values do not fill shape ",
           ir::shape_to_string(shape));
  Tensor t(allocate_impl(shape, DType::kBool, "from_vector"));
  bool* p = static_cast<bool*>(t.mutable_raw_data());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

Tensor Tensor::load_npy(const std::filesystem::path& file) {
  npy::Array array = npy::load(file);
  return from_bytes(array.dtype, array.shape, array.bytes.data());
}

void Tensor::save_npy(const std::filesystem::path& file) const {
  npy::save(file, dtype(), shape(), raw_data());
}

TensorStats tensor_stats(const Tensor& tensor) {
  const std::vector<double> values = tensor.to_doubles();
  TensorStats stats;
  if (values.empty()) return stats;
  stats.min = std::numeric_limits<double>::infinity();
  stats.max = -stats.min;
  for (double v : values) {
    stats.sum += v;
    stats.min = std::min(stats.min, v);
    stats.max = std::max(stats.max, v);
  }
  stats.mean = stats.sum / double(values.size());
  return stats;
}

}  // namespace mf
