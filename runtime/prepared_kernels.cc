#include "runtime/prepared_kernels.h"

#include <unordered_set>
#include <vector>

#include "runtime/dnnl/prepare.h"

namespace mf::runtime {

PreparedKernels::PreparedKernels(const Plan& plan, int threads, bool deterministic) {
  prepare_plan(plan, threads, deterministic);
}

void PreparedKernels::prepare_plan(const Plan& root, int threads, bool deterministic) {
  // Subplans are shared, and a recursive graph's plan is its own subplan: each plan is prepared
  // once, from a worklist, so neither sharing nor recursion nor nesting depth costs stack.
  std::vector<const Plan*> pending{&root};
  std::unordered_set<const Plan*> seen{&root};
  while (!pending.empty()) {
    const Plan& plan = *pending.back();
    pending.pop_back();
    for (const Step& step : plan.steps) {
      for (const auto& sub : step.subplans) {
        if (seen.insert(sub.get()).second) pending.push_back(sub.get());
      }
      prepare_step(plan, step, threads, deterministic);
    }
  }
}

void PreparedKernels::prepare_step(const Plan& plan, const Step& step, int threads,
                                   bool deterministic) {
  std::vector<ir::TensorType> types;
  std::vector<const void*> constants;
  types.reserve(step.inputs.size());
  constants.reserve(step.inputs.size());
  for (int id : step.inputs) {
    const Slot& slot = plan.slots[id];
    types.push_back(slot.type);
    constants.push_back(slot.kind == SlotKind::kConstant
                            ? plan.graph->constant(slot.index)->bytes().data()
                            : nullptr);
  }
  const dnnl_rt::Prepared prepared = dnnl_rt::prepare(
      step.node->op(), {types, constants, step.node->attrs(), threads, deterministic});
  if (prepared.created) ++prepared_;
  if (prepared.state != nullptr) states_.emplace(step.node, prepared.state);
}

}  // namespace mf::runtime
