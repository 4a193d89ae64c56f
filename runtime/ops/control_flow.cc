// Control flow: call, cond and while run subgraphs that their attributes name. Their output types
// come from those subgraphs, which an OpDef cannot see, so graphs build them with
// Graph::create_node stating the types (the verifier checks them against the subgraphs), and only
// the graph executors run them: the registered kernel refuses, since a kernel has no graph to run.

#include <span>
#include <string>
#include <vector>

#include "runtime/kernels/op_util.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

constexpr Trait kControlFlowTraits = Trait::kControlFlow | Trait::kOpaque;

ir::InferFn refuse_infer(std::string op) {
  return
      [op = std::move(op)](std::span<const TensorType>, const Attrs&) -> std::vector<TensorType> {
        MF_FAIL(InvalidArgument, "op '", op,
                "' takes its output types from the subgraphs it names; build it with "
                "Graph::create_node stating the output types (ir::verify checks them against the "
                "subgraphs)");
      };
}

ir::KernelFn refuse_kernel(std::string op) {
  return [op = std::move(op)](const ir::KernelContext&) {
    MF_FAIL(Internal, "op '", op,
            "' is run by the graph executor (KernelExecutor/SinkExecutor), not as a kernel");
  };
}

const ir::OpRegistration kCall =
    ir::define_op("call")
        .inputs(0, -1)
        .outputs(-1)
        .attr("graph", ir::AttrKind::kString, std::nullopt, "the subgraph to run on the inputs")
        .traits(kControlFlowTraits)
        .infer(refuse_infer("call"))
        .kernel(refuse_kernel("call"))
        .doc("runs subgraph @graph on the inputs; its outputs are the subgraph's outputs");

const ir::OpRegistration kCond =
    ir::define_op("cond")
        .inputs(1, -1)
        .outputs(-1)
        .attr("then_branch", ir::AttrKind::kString, std::nullopt, "subgraph run when pred is true")
        .attr("else_branch", ir::AttrKind::kString, std::nullopt, "subgraph run when pred is false")
        .traits(kControlFlowTraits)
        .infer(refuse_infer("cond"))
        .kernel(refuse_kernel("cond"))
        .doc(
            "cond(pred, x...): pred is a scalar (nonzero = true); runs @then_branch or "
            "@else_branch on x... and returns its outputs (both branches give the same types)");

const ir::OpRegistration kWhile =
    ir::define_op("while")
        .inputs(1, -1)
        .outputs(-1)
        .attr("cond_graph", ir::AttrKind::kString, std::nullopt,
              "subgraph(vars) -> scalar predicate; the loop runs while it is nonzero")
        .attr("body_graph", ir::AttrKind::kString, std::nullopt,
              "subgraph(vars) -> new vars of the same types")
        .traits(kControlFlowTraits)
        .infer(refuse_infer("while"))
        .kernel(refuse_kernel("while"))
        .doc(
            "while(vars...): while @cond_graph(vars) is nonzero, vars = @body_graph(vars); "
            "returns the final vars");

}  // namespace
}  // namespace mf::runtime::ops
