#pragma once
// Ops registered only by the IR tests ("test_" prefix), so the IR layer is tested without
// runtime/ops. register_test_ops() is idempotent and may be called from any test file.

#include "base/error.h"
#include "ir/op_def.h"

namespace mf::ir::testing {

inline std::vector<TensorType> infer_same(std::span<const TensorType> in, const Attrs&) {
  return {in[0]};
}

inline void register_test_ops() {
  [[maybe_unused]] static const bool once = [] {
    [[maybe_unused]] static const OpRegistration add =
        define_op("test_add")
            .arity(2)
            .traits(Trait::kElementwise | Trait::kBroadcast | Trait::kPure | Trait::kCommutative)
            .infer([](std::span<const TensorType> in, const Attrs&) {
              MF_CHECK(in[0].dtype == in[1].dtype, InvalidArgument, "op 'test_add': dtypes differ");
              return std::vector<TensorType>{
                  {in[0].dtype, broadcast_shapes(in[0].shape, in[1].shape, "test_add")}};
            });
    [[maybe_unused]] static const OpRegistration relu =
        define_op("test_relu")
            .arity(1)
            .traits(Trait::kElementwise | Trait::kPure)
            .infer(infer_same);
    [[maybe_unused]] static const OpRegistration matmul =
        define_op("test_matmul")
            .arity(2)
            .attr("transpose_a", AttrKind::kBool, false)
            .attr("transpose_b", AttrKind::kBool, false)
            .traits(Trait::kOpaque | Trait::kPure)
            .infer([](std::span<const TensorType> in, const Attrs& attrs) {
              const bool ta = attr_bool(attrs, "transpose_a", "test_matmul");
              const bool tb = attr_bool(attrs, "transpose_b", "test_matmul");
              MF_CHECK(in[0].shape.size() == 2 && in[1].shape.size() == 2, InvalidArgument,
                       "op 'test_matmul' needs 2-D inputs");
              const int64_t m = in[0].shape[ta ? 1 : 0], k = in[0].shape[ta ? 0 : 1];
              const int64_t k2 = in[1].shape[tb ? 1 : 0], n = in[1].shape[tb ? 0 : 1];
              MF_CHECK(k == k2, InvalidArgument, "op 'test_matmul': contraction sizes ", k, " and ",
                       k2, " differ");
              return std::vector<TensorType>{{in[0].dtype, {m, n}}};
            });
    [[maybe_unused]] static const OpRegistration split =
        define_op("test_split")
            .arity(1)
            .outputs(-1)
            .attr("num", AttrKind::kInt)
            .attr("axis", AttrKind::kInt, int64_t{0})
            .infer([](std::span<const TensorType> in, const Attrs& attrs) {
              const int64_t num = attr_int(attrs, "num", "test_split");
              const int64_t axis = normalize_axis(attr_int(attrs, "axis", "test_split"),
                                                  in[0].shape.size(), "test_split");
              MF_CHECK(num > 0 && num <= 64 && in[0].shape[axis] % num == 0, InvalidArgument,
                       "op 'test_split': cannot split ", in[0].shape[axis], " into ", num);
              TensorType part = in[0];
              part.shape[axis] /= num;
              return std::vector<TensorType>(num, part);
            });
    [[maybe_unused]] static const OpRegistration all_attrs =
        define_op("test_all_attrs")
            .arity(1)
            .attr("flag", AttrKind::kBool, false)
            .attr("count", AttrKind::kInt, int64_t{1})
            .attr("scale", AttrKind::kFloat, 1.0)
            .attr("label", AttrKind::kString, std::string())
            .attr("dims", AttrKind::kInts, std::vector<int64_t>{})
            .attr("weights", AttrKind::kFloats, std::vector<double>{})
            .attr("dtype", AttrKind::kDType, DType::kFloat32)
            .infer(infer_same);
    [[maybe_unused]] static const OpRegistration cast =
        define_op("test_cast")
            .arity(1)
            .attr("to", AttrKind::kDType)
            .infer([](std::span<const TensorType> in, const Attrs& attrs) {
              return std::vector<TensorType>{{attr_dtype(attrs, "to", "test_cast"), in[0].shape}};
            });
    // Control flow stand-in: passes its operands through and names the subgraph it would run.
    [[maybe_unused]] static const OpRegistration call =
        define_op("test_call")
            .inputs(0, -1)
            .outputs(-1)
            .attr("graph", AttrKind::kString)
            .infer([](std::span<const TensorType> in, const Attrs&) {
              return std::vector<TensorType>(in.begin(), in.end());
            });
    [[maybe_unused]] static const OpRegistration sink =
        define_op("test_sink")
            .arity(1)
            .outputs(0)
            .traits(Trait::kSideEffect)
            .infer([](std::span<const TensorType>, const Attrs&) {
              return std::vector<TensorType>{};
            });
    return true;
  }();
}

inline TensorType f32(Shape shape) {
  return {DType::kFloat32, std::move(shape)};
}

}  // namespace mf::ir::testing
