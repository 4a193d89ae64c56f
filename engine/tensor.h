#pragma once
// mf::Tensor: the user's handle to a value. In PYNATIVE mode a tensor may still be being computed
// on the executor's worker; reading its data waits for exactly the task that produces it, and
// rethrows that task's error (naming the op, its scope and the call site) if it failed.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "ir/dtype.h"
#include "ir/op_def.h"
#include "ir/shape.h"
#include "runtime/memory_pool.h"

namespace mf {

using ir::DType;
using ir::Shape;

struct TensorImpl;

// The parameter a cell holds now, for the tensors it held before (TensorImpl::slot).
struct ParameterSlot {
  std::weak_ptr<TensorImpl> current;
};

// What a Tensor shares: its type, its buffer and, while pending, the executor task that fills it.
struct TensorImpl {
  ir::TensorType type;  // what the user sees: channels-last storage does not change it
  std::shared_ptr<runtime::Buffer> buffer;
  uint64_t ready_seq = 0;  // the eager task writing the buffer; 0 when the data is ready
  // PYNATIVE only: the buffer holds this rank-4 (N, C, H, W) tensor in (N, H, W, C) order, as an
  // eager convolution left it for the next one (engine/eager/eager_layout.h). Set when the tensor
  // is made, cleared only by Tensor::mutable_raw_data after every queued op has run.
  bool channels_last = false;
  // A weight: a cell's parameter or a Parameter. A traced graph binds it at every call, never
  // copies its value in as a constant, since an optimizer or set_data changes it in place.
  bool is_parameter = false;
  // For a parameter that a cell replaced with another tensor (Cell::set_parameter, `net.w =
  // Parameter(...)`), shared with its replacements: the tensor now in its place, which a graph that
  // captured this one binds instead. Null for a parameter never replaced.
  std::shared_ptr<ParameterSlot> slot;
  // The (N, C, H, W)-ordered copy of a channels-last tensor, made once when first needed.
  std::shared_ptr<TensorImpl> plain;
  std::mutex plain_mutex;
};

class Tensor {
 public:
  Tensor() = default;  // undefined; defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const ir::TensorType& type() const;
  const Shape& shape() const { return type().shape; }
  DType dtype() const { return type().dtype; }
  int64_t numel() const { return ir::num_elements(shape()); }
  size_t nbytes() const { return size_t(numel()) * ir::dtype_size(dtype()); }

  // Waits for the producing task; throws its error if it failed.
  void sync() const;
  // Element pointer after sync(); T must match dtype() (InvalidArgument otherwise).
  template <typename T>
  const T* data() const {
    check_dtype(ir::dtype_of<T>(), "data");
    return static_cast<const T*>(raw_data());
  }
  template <typename T>
  std::vector<T> to_vector() const {
    const T* p = data<T>();
    return std::vector<T>(p, p + numel());
  }
  // Any numeric dtype, converted to double (for reports and comparisons).
  std::vector<double> to_doubles() const;
  const void* raw_data() const;

  // Creation. Floating tensors from randn/uniform are reproducible from the seed on every platform.
  static Tensor empty(const Shape& shape, DType dtype = DType::kFloat32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::kFloat32);
  static Tensor ones(const Shape& shape, DType dtype = DType::kFloat32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::kFloat32);
  static Tensor randn(const Shape& shape, uint64_t seed = 0, double stddev = 1.0);
  static Tensor uniform(const Shape& shape, double low, double high, uint64_t seed = 0);
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
    MF_CHECK(int64_t(values.size()) == ir::num_elements(shape), InvalidArgument,
             "from_vector: ", values.size(), " values do not fill shape ",
             ir::shape_to_string(shape), " (", ir::num_elements(shape), " elements)");
    return from_bytes(ir::dtype_of<T>(), shape, values.data());
  }
  static Tensor from_vector(const std::vector<bool>& values, const Shape& shape);
  static Tensor from_bytes(DType dtype, const Shape& shape, const void* bytes);

  static Tensor load_npy(const std::filesystem::path& file);
  void save_npy(const std::filesystem::path& file) const;

  // For the dispatcher and executors.
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  // A writable pointer to a tensor that no task is writing (creation helpers, tests). Marks the
  // buffer written: anything a kernel derived from its old bytes is not used again.
  void* mutable_raw_data();

 private:
  void check_dtype(DType wanted, const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

// Summary statistics printed by `mf run`: sum, mean, min, max over all elements as doubles.
struct TensorStats {
  double sum = 0, mean = 0, min = 0, max = 0;
};
TensorStats tensor_stats(const Tensor& tensor);

}  // namespace mf
