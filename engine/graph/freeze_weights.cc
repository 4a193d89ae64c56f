#include "engine/graph/freeze_weights.h"

#include <cstring>

namespace mf::engine {

bool FrozenWeights::same_as(const std::vector<Tensor>& current) const {
  if (current.size() != tensors.size()) return false;
  for (size_t i = 0; i < current.size(); ++i) {
    if (current[i].impl() != tensors[i]) return false;
    // Written in place since (an optimizer step, a loaded checkpoint): the constant is stale.
    if (current[i].impl()->buffer.get() != buffers[i] ||
        current[i].impl()->buffer->version() != versions[i]) {
      return false;
    }
  }
  return true;
}

std::vector<Tensor> current_weights(const ir::Graph& graph,
                                    const std::function<Tensor(const ir::Parameter&)>& weight_of) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < graph.num_parameters(); ++i) {
    const ir::Parameter& p = *graph.parameter(i);
    if (!p.is_weight()) continue;
    Tensor t = weight_of(p);
    if (t.defined()) out.push_back(std::move(t));
  }
  return out;
}

FrozenWeights freeze_weights(ir::Graph& graph,
                             const std::function<Tensor(const ir::Parameter&)>& weight_of) {
  FrozenWeights frozen;
  // A graph that writes its variables (a batch norm training) keeps every weight bound.
  if (ir::writes_inputs(graph)) return frozen;
  for (size_t i = 0; i < graph.num_parameters(); ++i) {
    ir::Parameter* p = graph.parameter(i);
    if (!p->is_weight()) continue;
    const Tensor t = weight_of(*p);
    if (!t.defined()) continue;
    MF_CHECK(t.type() == p->type(), InvalidArgument, "infer_boost: weight '", p->name(),
             "' is declared ", ir::type_to_string(p->type()), " but its tensor is ",
             ir::type_to_string(t.type()));
    t.sync();
    const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(t.raw_data()), t.nbytes());
    frozen.bytes += bytes.size();
    ir::Constant* c = graph.add_constant(p->type(), bytes);
    graph.replace_all_uses(ir::Value(p), ir::Value(c));
    frozen.tensors.push_back(t.impl());
    frozen.buffers.push_back(t.impl()->buffer.get());
    frozen.versions.push_back(t.impl()->buffer->version());
  }
  return frozen;
}

}  // namespace mf::engine
