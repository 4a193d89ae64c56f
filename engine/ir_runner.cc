#include "engine/ir_runner.h"

#include <source_location>
#include <unordered_map>

#include "engine/dispatch.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace mf::engine {

IrRunner IrRunner::from_file(const std::string& path) {
  auto graph = ir::parse_graph_file(path);
  ir::verify(*graph);
  return IrRunner(std::move(graph));
}

std::vector<std::pair<std::string, Tensor>> IrRunner::run(
    const std::map<std::string, Tensor>& inputs, uint64_t seed) {
  generated_.clear();
  std::unordered_map<ir::Value, Tensor, ir::ValueHash> values;
  for (size_t i = 0; i < graph_->num_parameters(); ++i) {
    ir::Parameter* p = graph_->parameter(i);
    auto fed = inputs.find(p->name());
    Tensor t;
    if (fed != inputs.end()) {
      MF_CHECK(fed->second.type() == p->type(), InvalidArgument, "input '", p->name(), "' is ",
               ir::type_to_string(fed->second.type()), " but the graph declares ",
               ir::type_to_string(p->type()));
      t = fed->second;
    } else if (p->type().dtype == DType::kFloat32) {
      t = Tensor::randn(p->type().shape, seed + i, 0.1);
      generated_.push_back(p->name());
    } else {
      t = Tensor::zeros(p->type().shape, p->type().dtype);
      generated_.push_back(p->name());
    }
    values[ir::Value(p)] = t;
  }
  for (const auto& [name, tensor] : inputs) {
    MF_CHECK(graph_->find_parameter(name) != nullptr, InvalidArgument,
             "the graph has no parameter named '", name, "'");
  }
  for (size_t i = 0; i < graph_->num_constants(); ++i) {
    ir::Constant* c = graph_->constant(i);
    values[ir::Value(c)] = Tensor::from_bytes(c->type().dtype, c->type().shape, c->bytes().data());
  }
  for (ir::Node* node : graph_->topological_order()) {
    std::vector<Tensor> args;
    for (const ir::Value& v : node->inputs()) args.push_back(values.at(v));
    std::vector<Tensor> outs;
    try {
      outs = call_op(node->op(), args, node->attrs());
    } catch (Error& e) {
      e.add_context("at node %" + std::to_string(node->id()) + " of graph @" + graph_->name());
      throw;
    }
    for (size_t k = 0; k < outs.size(); ++k) values[node->output(k)] = outs[k];
  }
  std::vector<std::pair<std::string, Tensor>> outputs;
  for (size_t i = 0; i < graph_->outputs().size(); ++i) {
    outputs.emplace_back("output" + std::to_string(i), values.at(graph_->outputs()[i]));
  }
  return outputs;
}

}  // namespace mf::engine
