#pragma once
// Declared input signatures with dynamic dimensions: what `Cell.set_inputs(Tensor(shape=[None,
// 784]))` and an ONNX input's `dim_param` say. A dimension is a known size or a symbol ("batch");
// an unnamed one ("?") is its own symbol. A call binds every symbol from the shapes it brings, and
// a shape that contradicts the declaration is an error naming the input and the dimension.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"

namespace mf::ir {

// A declared dimension: size >= 0 is known; otherwise `symbol` names it ("" for an unnamed "?").
struct SymbolicDim {
  int64_t size = -1;
  std::string symbol;
  bool known() const { return size >= 0; }
  bool operator==(const SymbolicDim&) const = default;
};
using SymbolicShape = std::vector<SymbolicDim>;

// One declared input: its name (as errors name it), dtype and dimensions.
struct InputSignature {
  std::string name;
  DType dtype = DType::kFloat32;
  SymbolicShape shape;
  bool operator==(const InputSignature&) const = default;
};

// The longest symbol name kept; longer names from a file are cut (they are echoed in errors).
inline constexpr size_t kMaxSymbolChars = 64;

// "(batch, 784)", "(?, 3, 224, 224)", "()" for a scalar.
std::string symbolic_shape_to_string(const SymbolicShape& shape);
// "x: Float32 (batch, 784)"; several joined by ", ".
std::string signature_to_string(std::span<const InputSignature> inputs);
// Whether any dimension is unknown.
bool is_dynamic(const SymbolicShape& shape);
bool is_dynamic(std::span<const InputSignature> inputs);
// A static shape as a declaration.
SymbolicShape symbolic_shape(const Shape& shape);

// The values a call binds its symbols to, by symbol name (unnamed dimensions bind nothing).
using SymbolValues = std::map<std::string, int64_t>;

// Checks `shape` (and `dtype`) against `input` and binds its symbols into `values`: a wrong rank or
// dtype, a known dimension that differs, or a symbol bound to another size by an earlier input is
// InvalidArgument naming the input, the axis and the declaration.
void bind_input(const InputSignature& input, DType dtype, const Shape& shape, SymbolValues& values);

// The concrete shape of `input` under `values`: unbound symbols, and unnamed dimensions, take
// `unbound` (a generated input's size).
Shape concrete_shape(const InputSignature& input, const SymbolValues& values, int64_t unbound = 1);

}  // namespace mf::ir
