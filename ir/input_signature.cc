#include "ir/input_signature.h"

#include "base/error.h"

namespace mf::ir {
namespace {

std::string dim_to_string(const SymbolicDim& dim) {
  if (dim.known()) return std::to_string(dim.size);
  // Unnamed dimensions print as "?", also once given their own symbol ("?1").
  return dim.symbol.empty() || dim.symbol[0] == '?' ? "?" : dim.symbol;
}

}  // namespace

std::string symbolic_shape_to_string(const SymbolicShape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i == 16 && shape.size() > 17) {
      out +=
          "..., " + dim_to_string(shape.back()) + ") [rank " + std::to_string(shape.size()) + "]";
      return out;
    }
    out += (i ? ", " : "") + dim_to_string(shape[i]);
  }
  return out + ")";
}

std::string signature_to_string(std::span<const InputSignature> inputs) {
  std::string out;
  for (const InputSignature& input : inputs) {
    out += (out.empty() ? "" : ", ") + echo(input.name, 80) + ": " +
           std::string(dtype_name(input.dtype)) + " " + symbolic_shape_to_string(input.shape);
  }
  return out;
}

bool is_dynamic(const SymbolicShape& shape) {
  for (const SymbolicDim& dim : shape) {
    if (!dim.known()) return true;
  }
  return false;
}

bool is_dynamic(std::span<const InputSignature> inputs) {
  for (const InputSignature& input : inputs) {
    if (is_dynamic(input.shape)) return true;
  }
  return false;
}

SymbolicShape symbolic_shape(const Shape& shape) {
  SymbolicShape out;
  out.reserve(shape.size());
  for (int64_t d : shape) out.push_back({d, {}});
  return out;
}

void bind_input(const InputSignature& input, DType dtype, const Shape& shape,
                SymbolValues& values) {
  const std::string declared = symbolic_shape_to_string(input.shape);
  const std::string name = echo(input.name, 80);
  MF_CHECK(dtype == input.dtype, InvalidArgument, "input '", name, "' is ", dtype_name(dtype),
           " but is declared ", dtype_name(input.dtype), " ", declared, ": give a ",
           dtype_name(input.dtype), " tensor");
  MF_CHECK(shape.size() == input.shape.size(), InvalidArgument, "input '", name, "' has rank ",
           shape.size(), " (shape ", shape_to_string(shape), ") but is declared ", declared,
           ": give a rank-", input.shape.size(), " tensor");
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    const SymbolicDim& dim = input.shape[axis];
    if (dim.known()) {
      MF_CHECK(shape[axis] == dim.size, InvalidArgument, "input '", name, "' dimension ", axis,
               " is ", shape[axis], " but is declared ", dim.size, " in ", declared);
      continue;
    }
    if (dim.symbol.empty()) continue;
    const auto [it, inserted] = values.emplace(dim.symbol, shape[axis]);
    MF_CHECK(inserted || it->second == shape[axis], InvalidArgument, "input '", name,
             "' dimension ", axis, " ('", echo(dim.symbol, kMaxSymbolChars), "' in ", declared,
             ") is ", shape[axis], " but an earlier input bound '",
             echo(dim.symbol, kMaxSymbolChars), "' to ", it->second,
             ": inputs that share a symbol must agree on its size");
  }
}

Shape concrete_shape(const InputSignature& input, const SymbolValues& values, int64_t unbound) {
  Shape shape;
  shape.reserve(input.shape.size());
  for (const SymbolicDim& dim : input.shape) {
    if (dim.known()) {
      shape.push_back(dim.size);
    } else if (auto it = values.find(dim.symbol); !dim.symbol.empty() && it != values.end()) {
      shape.push_back(it->second);
    } else {
      shape.push_back(unbound);
    }
  }
  return shape;
}

}  // namespace mf::ir
