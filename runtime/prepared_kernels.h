#pragma once
// What a compiled plan's kernels prepare once, when the executor is made ready to run: every
// oneDNN primitive the steps will run (so the first run creates none), and per-node state built
// from the graph's constants (weights reordered into the primitive's layout), handed to the kernel
// as KernelContext::prepared on every run. Lives as long as the executor that owns it, which
// keeps the plan (and so the constants the state was built from) alive.

#include <cstddef>
#include <memory>
#include <unordered_map>

#include "runtime/plan.h"

namespace mf::runtime {

class PreparedKernels {
 public:
  PreparedKernels() = default;
  // Prepares every step of `plan` and of its subplans for `threads` intra-op threads.
  PreparedKernels(const Plan& plan, int threads, bool deterministic);

  // The state prepared for `node`, or null.
  const void* state(const ir::Node& node) const {
    if (states_.empty()) return nullptr;
    auto it = states_.find(&node);
    return it == states_.end() ? nullptr : it->second.get();
  }
  size_t prepared() const { return prepared_; }  // nodes whose primitive was created
  size_t with_state() const { return states_.size(); }

 private:
  void prepare_plan(const Plan& plan, int threads, bool deterministic);
  void prepare_step(const Plan& plan, const Step& step, int threads, bool deterministic);

  std::unordered_map<const ir::Node*, std::shared_ptr<const void>> states_;
  size_t prepared_ = 0;
};

}  // namespace mf::runtime
