// assign(variable, value): writes value into variable's bytes in place and returns value, as
// MindSpore's ops.assign. Layers keep state this way across calls (a batch norm's moving
// statistics while training) in both modes: op by op it writes the variable tensor, in a
// compiled graph the weight the variable is bound to. It runs in program order even when its
// result is unused, and no gradient flows through it.

#include <cstring>

#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

const ir::OpRegistration kAssign =
    ir::define_op("assign")
        .arity(2)
        .traits(Trait::kSideEffect | Trait::kNoGradient | Trait::kWritesInput)
        .infer([](std::span<const TensorType> in, const Attrs&) {
          MF_CHECK(in[0] == in[1], InvalidArgument, "assign: the value ", ir::type_to_string(in[1]),
                   " must have the variable's type ", ir::type_to_string(in[0]));
          return std::vector<TensorType>{in[1]};
        })
        .kernel([](const ir::KernelContext& ctx) {
          const size_t bytes = ctx.inputs[1].size() * ir::dtype_size(ctx.inputs[1].type.dtype);
          if (bytes == 0) return;
          if (ctx.inputs[0].data != ctx.inputs[1].data) {
            std::memmove(ctx.inputs[0].data, ctx.inputs[1].data, bytes);
          }
          if (ctx.outputs[0].data != ctx.inputs[1].data) {
            std::memcpy(ctx.outputs[0].data, ctx.inputs[1].data, bytes);
          }
        })
        .reference([](std::span<const RefTensor> in, const Attrs&) {
          return std::vector<RefTensor>{in[1]};
        })
        .samples({sample({f32({2, 3}), f32({2, 3})}), sample({f32({0, 4}), f32({0, 4})}),
                  sample({i32({5}), i32({5})})})
        .doc("writes input 1 into input 0 (a variable) in place; returns input 1");

}  // namespace
}  // namespace mf::runtime::ops
