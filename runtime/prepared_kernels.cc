#include "runtime/prepared_kernels.h"

#include <vector>

#include "runtime/dnnl/prepare.h"

namespace mf::runtime {

PreparedKernels::PreparedKernels(const Plan& plan, int threads, bool deterministic) {
  prepare_plan(plan, threads, deterministic);
}

void PreparedKernels::prepare_plan(const Plan& plan, int threads, bool deterministic) {
  for (const Step& step : plan.steps) {
    for (const auto& sub : step.subplans) prepare_plan(*sub, threads, deterministic);
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
}

}  // namespace mf::runtime
