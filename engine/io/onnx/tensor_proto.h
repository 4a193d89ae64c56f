#pragma once
// ONNX TensorProto decoding for the importer (initializers, Constant values, test data): element
// types, the decoded host tensor, and the size checks that keep a damaged file from being trusted.
// Internal to engine/io/onnx/.

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tensor.h"
#include "ir/dtype.h"
#include "ir/op_def.h"
#include "ir/shape.h"

namespace mf::onnx {

class TensorProto;  // onnx.proto; the generated header stays out of engine headers

namespace detail {

// Beyond this many elements a tensor is treated as damage, not data (2^40 floats is 4 TiB).
inline constexpr int64_t kMaxElements = ir::kMaxTensorElements;

inline constexpr const char* kSupportedTypes =
    "supported element types: FLOAT, DOUBLE, INT32, INT64, BOOL (cast in the exporter)";

// The IR element type of an ONNX TensorProto.DataType; nullopt for those the importer does not
// read.
std::optional<ir::DType> to_dtype(int32_t onnx_type);
// "FLOAT", or "type #N" for a number the enum does not know.
std::string onnx_type_name(int32_t onnx_type);
// 'name', or (unnamed).
std::string quoted_name(const std::string& name);

// A tensor whose value is known while importing: an initializer or an ir constant.
struct HostTensor {
  ir::TensorType type;
  std::vector<uint8_t> bytes;

  int64_t size() const { return ir::num_elements(type.shape); }
  double at(int64_t i) const {
    return ir::visit_dtype(type.dtype, [&](auto tag) -> double {
      using T = decltype(tag);
      T v;
      std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
      return static_cast<double>(v);
    });
  }
  std::vector<int64_t> ints() const {
    std::vector<int64_t> out(size());
    for (int64_t i = 0; i < size(); ++i) {
      if (type.dtype == ir::DType::kInt64) {
        std::memcpy(&out[i], bytes.data() + i * 8, 8);  // exact beyond 2^53
      } else {
        out[i] = static_cast<int64_t>(at(i));
      }
    }
    return out;
  }
};

// Decodes a TensorProto into row-major little-endian bytes, checking every size against the data.
// `what` says what the tensor is in messages ("initializer", "Constant value").
HostTensor decode_tensor(const TensorProto& t, std::string_view what);
// The dtype and dims alone, checked as decode_tensor checks them.
ir::TensorType tensor_proto_type(const TensorProto& t, std::string_view what);

Tensor to_tensor(const HostTensor& h);

}  // namespace detail
}  // namespace mf::onnx
