// fill {shape, value, dtype}, zeros {shape, dtype}, ones {shape, dtype}: ops without inputs that
// produce a constant tensor (constant folding turns them into graph constants).

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

Shape shape_attr(std::string_view op, const Attrs& attrs) {
  const std::vector<int64_t>& dims = ir::attr_ints(attrs, "shape", op);
  for (int64_t d : dims) {
    MF_CHECK(d >= 0, InvalidArgument, op, ": shape ", ints_to_string(dims),
             " has a negative dimension");
  }
  return Shape(dims.begin(), dims.end());
}

// The value as the output dtype stores it (ints truncate toward zero, Bool is value != 0).
double stored_value(double value, DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return static_cast<double>(static_cast<float>(value));
    case DType::kFloat64:
      return value;
    case DType::kInt32:
    case DType::kInt64:
      return std::trunc(value);
    case DType::kBool:
      return value != 0.0 ? 1.0 : 0.0;
  }
  return value;
}

// The value must be one the dtype can hold: an integer dtype takes finite values in its range
// (truncated toward zero), float32 finite values below its largest (or an infinity or NaN given as
// such); never a silent INT_MIN or infinity.
void check_value(std::string_view op, double value, DType dtype) {
  const auto fits = [&](double lo, double hi) { return value >= lo && value < hi; };
  bool ok = true;
  switch (dtype) {
    case DType::kInt32:
      ok = fits(-2147483649.0, 2147483648.0);  // truncation toward zero keeps (-2^31 - 1, 2^31)
      break;
    case DType::kInt64:
      ok = fits(-9223372036854775808.0, 9223372036854775808.0);
      break;
    case DType::kFloat32:
      ok = !std::isfinite(value) || std::abs(value) <= std::numeric_limits<float>::max();
      break;
    case DType::kFloat64:
    case DType::kBool:
      break;
  }
  MF_CHECK(ok, InvalidArgument, op, ": value ", value, " does not fit dtype ",
           ir::dtype_name(dtype), std::isnan(value) ? " (NaN has no integer value)" : "",
           "; give a value in the dtype's range or a wider dtype");
}

// fill's value comes from the attribute; zeros and ones fix it.
ir::OpBuilder declare(std::string name, std::optional<double> fixed, std::string doc) {
  ir::OpBuilder b = ir::define_op(name);
  b.inputs(0, 0).attr("shape", ir::AttrKind::kInts, std::nullopt, "the output shape");
  if (!fixed) b.attr("value", ir::AttrKind::kFloat, std::nullopt, "the value of every element");
  auto value_of = [fixed, name](const Attrs& attrs) {
    return fixed ? *fixed : ir::attr_float(attrs, "value", name);
  };
  b.attr("dtype", ir::AttrKind::kDType, DType::kFloat32, "the output dtype")
      .traits(Trait::kPure)
      .infer([name, value_of](std::span<const TensorType>, const Attrs& attrs) {
        const DType dtype = ir::attr_dtype(attrs, "dtype", name);
        if (attrs.count("value") != 0 || name != "fill") check_value(name, value_of(attrs), dtype);
        return std::vector<TensorType>{{dtype, shape_attr(name, attrs)}};
      })
      .kernel([value_of](const ir::KernelContext& ctx) {
        const double value = value_of(ctx.attrs);
        const ir::TensorView& out = ctx.outputs[0];
        ir::visit_dtype(out.type.dtype, [&](auto tag) {
          using T = decltype(tag);
          std::fill(out.as<T>(), out.as<T>() + out.size(), static_cast<T>(value));
        });
      })
      .reference([value_of, name](std::span<const RefTensor>, const Attrs& attrs) {
        const DType dtype = ir::attr_dtype(attrs, "dtype", name);
        return std::vector<RefTensor>{
            ref_tensor(shape_attr(name, attrs), stored_value(value_of(attrs), dtype))};
      })
      .doc(std::move(doc));
  auto with = [&](std::vector<int64_t> shape, DType dtype) {
    Attrs attrs{{"shape", shape}, {"dtype", dtype}};
    if (!fixed) attrs["value"] = 2.5;
    return sample({}, attrs);
  };
  b.samples({with({2, 3}, DType::kFloat32), with({}, DType::kFloat64), with({4}, DType::kInt32),
             with({2, 2}, DType::kInt64), with({3}, DType::kBool), with({0, 3}, DType::kFloat32)});
  return b;
}

const ir::OpRegistration kFill =
    declare("fill", std::nullopt, "a tensor of `shape` and `dtype` with every element `value`");
const ir::OpRegistration kZeros = declare("zeros", 0.0, "a tensor of `shape` and `dtype` of zeros");
const ir::OpRegistration kOnes = declare("ones", 1.0, "a tensor of `shape` and `dtype` of ones");

}  // namespace
}  // namespace mf::runtime::ops
