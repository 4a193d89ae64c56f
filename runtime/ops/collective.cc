// Collectives across the workers of a job, as MindSpore's AllReduce, AllGather and Broadcast:
// registry ops, so they run op by op and in compiled graphs, and appear in dumps. They run in
// program order and are never removed or merged (every worker must call the same collectives in
// the same order). Outside an initialized group (communication.init) the group is this process
// alone, so a network written for data parallelism also runs in one process unchanged.

#include <cstring>

#include "runtime/comm/communicator.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

comm::ReduceOp reduce_op_of(const Attrs& attrs) {
  const std::string& op = ir::attr_string(attrs, "op", "all_reduce");
  if (op == "sum") return comm::ReduceOp::kSum;
  if (op == "max") return comm::ReduceOp::kMax;
  if (op == "min") return comm::ReduceOp::kMin;
  if (op == "prod") return comm::ReduceOp::kProd;
  MF_FAIL(InvalidArgument, "all_reduce: op '", echo(op), "' is not one of sum, max, min, prod");
}

// The group a collective runs in, checked against the size the graph was built for.
comm::Communicator* group_of(std::string_view op, int64_t expected_size) {
  comm::Communicator* world = comm::world();
  const int64_t size = world != nullptr ? world->size() : 1;
  MF_CHECK(size == expected_size, InvalidArgument, op, ": built for a group of ", expected_size,
           " workers but ", world != nullptr ? "the group has " : "no group is initialized: ", size,
           world != nullptr ? "" : " (call communication.init() first)");
  return world;
}

size_t bytes_of(const ir::TensorView& view) {
  return view.size() * ir::dtype_size(view.type.dtype);
}

void copy_if_apart(const ir::TensorView& from, const ir::TensorView& to) {
  if (from.data != to.data && bytes_of(from) > 0) std::memcpy(to.data, from.data, bytes_of(from));
}

const ir::OpRegistration kAllReduce =
    ir::define_op("all_reduce")
        .arity(1)
        .attr("op", ir::AttrKind::kString, std::string("sum"), "sum, max, min or prod")
        .traits(Trait::kSideEffect | Trait::kOpaque)
        .infer([](std::span<const TensorType> in, const Attrs& attrs) {
          reduce_op_of(attrs);
          MF_CHECK(in[0].dtype != DType::kBool, InvalidArgument,
                   "all_reduce: a Bool tensor is not reduced; cast it to Int32 first");
          return std::vector<TensorType>{in[0]};
        })
        .kernel([](const ir::KernelContext& ctx) {
          copy_if_apart(ctx.inputs[0], ctx.outputs[0]);
          if (comm::Communicator* world = comm::world()) {
            world->all_reduce(ctx.outputs[0].data, size_t(ctx.outputs[0].size()),
                              ctx.outputs[0].type.dtype, reduce_op_of(ctx.attrs), "all_reduce");
          }
        })
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          reduce_op_of(attrs);
          return std::vector<RefTensor>{in[0]};
        })
        // Every worker's loss depends on every worker's input through the reduction, so a
        // gradient gathers the output gradients of all workers: the sum of them for op=sum, and
        // for max/min that sum on the workers whose input was the extreme (each of them, on a tie).
        .backward({.inputs = 1, .outputs = 1},
                  [](ir::GradBuilder& b) {
                    if (!b.wants_grad(0)) return;
                    const comm::ReduceOp op = reduce_op_of(b.attrs());
                    MF_CHECK(op != comm::ReduceOp::kProd, Unsupported,
                             "all_reduce: op='prod' has no gradient rule; use sum, max or min");
                    const ir::GradValue total =
                        b.op("all_reduce", {b.dout(0)}, {{"op", std::string("sum")}});
                    if (op == comm::ReduceOp::kSum) return b.set_grad(0, total);
                    const ir::GradValue extreme =
                        b.op("cast", {b.op("equal", {b.input(0), b.output(0)})},
                             {{"dtype", b.input_type(0).dtype}});
                    b.set_grad(0, b.op("mul", {total, extreme}));
                  })
        .samples({sample({f32({3, 4})}), sample({f64({2, 3})}, {{"op", std::string("max")}}),
                  sample({f32({0, 2})}, {{"op", std::string("min")}}), sample({i64({5})})})
        .doc("reduces input 0 over the workers of the group (op: sum, max, min, prod)");

const ir::OpRegistration kAllGather =
    ir::define_op("all_gather")
        .arity(1)
        .attr("rank_size", ir::AttrKind::kInt, int64_t{1}, "the number of workers in the group")
        .traits(Trait::kSideEffect | Trait::kOpaque | Trait::kNoGradient)
        .infer([](std::span<const TensorType> in, const Attrs& attrs) {
          const int64_t ranks = ir::attr_int(attrs, "rank_size", "all_gather");
          MF_CHECK(ranks >= 1 && ranks <= 4096, InvalidArgument,
                   "all_gather: rank_size must be in [1, 4096], got ", ranks);
          MF_CHECK(!in[0].shape.empty(), InvalidArgument,
                   "all_gather: the input needs an axis 0 to gather along; got a scalar");
          TensorType out = in[0];
          MF_CHECK(out.shape[0] <= (int64_t{1} << 40) / ranks, InvalidArgument,
                   "all_gather: ", out.shape[0], " rows times ", ranks, " workers is too large");
          out.shape[0] *= ranks;
          return std::vector<TensorType>{out};
        })
        .kernel([](const ir::KernelContext& ctx) {
          comm::Communicator* world =
              group_of("all_gather", ir::attr_int(ctx.attrs, "rank_size", "all_gather"));
          if (world == nullptr) return copy_if_apart(ctx.inputs[0], ctx.outputs[0]);
          world->all_gather(ctx.inputs[0].data, ctx.outputs[0].data, bytes_of(ctx.inputs[0]),
                            "all_gather");
        })
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          const int64_t ranks = ir::attr_int(attrs, "rank_size", "all_gather");
          RefTensor out = in[0];
          out.shape[0] *= ranks;
          out.values.clear();
          for (int64_t r = 0; r < ranks; ++r) {
            out.values.insert(out.values.end(), in[0].values.begin(), in[0].values.end());
          }
          return std::vector<RefTensor>{out};
        })
        .samples({sample({f32({2, 3})}), sample({i32({0, 4})})})
        .doc("concatenates input 0 of every worker along axis 0, in rank order");

const ir::OpRegistration kBroadcast =
    ir::define_op("broadcast")
        .arity(1)
        .attr("root_rank", ir::AttrKind::kInt, int64_t{0}, "the worker whose value everyone gets")
        .traits(Trait::kSideEffect | Trait::kOpaque | Trait::kNoGradient)
        .infer([](std::span<const TensorType> in, const Attrs& attrs) {
          const int64_t root = ir::attr_int(attrs, "root_rank", "broadcast");
          MF_CHECK(root >= 0 && root < 4096, InvalidArgument,
                   "broadcast: root_rank must be in [0, 4096), got ", root);
          return std::vector<TensorType>{in[0]};
        })
        .kernel([](const ir::KernelContext& ctx) {
          copy_if_apart(ctx.inputs[0], ctx.outputs[0]);
          const int64_t root = ir::attr_int(ctx.attrs, "root_rank", "broadcast");
          comm::Communicator* world = comm::world();
          MF_CHECK(root < (world != nullptr ? world->size() : 1), InvalidArgument,
                   "broadcast: root_rank ", root, " is not a worker of this group of ",
                   world != nullptr ? world->size() : 1);
          if (world != nullptr) {
            world->broadcast(ctx.outputs[0].data, bytes_of(ctx.outputs[0]), int(root), "broadcast");
          }
        })
        .reference([](std::span<const RefTensor> in, const Attrs&) {
          return std::vector<RefTensor>{in[0]};
        })
        .samples({sample({f32({4})}), sample({f64({2, 0})}), sample({i64({})})})
        .doc("every worker gets root_rank's input 0");

}  // namespace
}  // namespace mf::runtime::ops
