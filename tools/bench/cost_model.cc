#include "tools/bench/cost_model.h"

#include <algorithm>
#include <variant>

#include "ir/attribute.h"
#include "ir/call_graph.h"

namespace mf::tools::bench {
namespace {

double bytes_of(const ir::TensorType& type) {
  return double(ir::num_elements(type.shape)) * double(ir::dtype_size(type.dtype));
}

using ir::names_subgraph;

double node_flops(const ir::Node& node) {
  const ir::TensorType& out = node.output_type(0);
  const double outputs = double(ir::num_elements(out.shape));
  if (node.op() == "matmul" || node.op() == "batch_matmul") {
    const ir::Shape& a = node.input(0).type().shape;
    const auto it = node.attrs().find("transpose_a");
    const bool transpose_a = it != node.attrs().end() &&
                             std::get_if<bool>(&it->second) != nullptr &&
                             std::get<bool>(it->second);
    const double k = double(a[a.size() - (transpose_a ? 2 : 1)]);
    return 2.0 * outputs * k;
  }
  if (node.op() == "conv2d") {
    const ir::Shape& w = node.input(1).type().shape;  // (out, in / groups, kh, kw)
    return 2.0 * outputs * double(w[1]) * double(w[2]) * double(w[3]);
  }
  return 0;
}

double graph_flops(const ir::Graph& graph, int depth) {
  if (depth > 64) return 0;  // recursion through calls: the estimate stops rather than loops
  double flops = 0;
  for (const ir::Node& node : graph.nodes()) {
    flops += node_flops(node);
    for (const auto& [name, value] : node.attrs()) {
      const auto* target = std::get_if<std::string>(&value);
      if (!names_subgraph(name) || target == nullptr) continue;
      if (const ir::Graph* sub = graph.resolve_subgraph(*target)) {
        flops += graph_flops(*sub, depth + 1);
      }
    }
  }
  return flops;
}

}  // namespace

NetCost minimal_cost(const ir::Graph& graph) {
  NetCost cost;
  for (size_t i = 0; i < graph.num_parameters(); ++i)
    cost.bytes += bytes_of(graph.parameter(i)->type());
  for (const ir::Value& output : graph.outputs()) cost.bytes += bytes_of(output.type());
  cost.flops = graph_flops(graph, 0);
  return cost;
}

Bound roofline_bound(const NetCost& cost, const HardwareRates& rates) {
  const double memory =
      rates.bandwidth_bytes_per_s > 0 ? cost.bytes / rates.bandwidth_bytes_per_s : 0;
  const double compute = rates.gemm_flops_per_s > 0 ? cost.flops / rates.gemm_flops_per_s : 0;
  return compute > memory ? Bound{compute, "compute"} : Bound{memory, "memory"};
}

}  // namespace mf::tools::bench
