// SinkExecutor (jit O2): everything is decided when the executor is built. Every step's TensorView
// arrays, kernel and attributes are bound once; the arena (memory O1) is allocated at the first run
// and kept, so a run binds the caller's parameter pointers, allocates the graph outputs (they
// outlive the run) and loops over the kernels. A memory-O0 plan's pooled intermediates are taken
// from the pool when their step runs and given back after their last reader, as KernelExecutor
// does, so the peak is the live set (kept across runs, they held every activation at once: 710 MiB
// on a 12-layer encoder whose live set is 48 MiB).
//
// Control-flow steps (call/cond/while) cannot be flattened: their subgraphs run a data-dependent
// number of times. They delegate to a nested KernelExecutor-style run of their subplans
// (detail::run_control_flow) and copy the results into the step's bound output bytes.

#include <atomic>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>

#include "runtime/executor_shared.h"
#include "runtime/fused_kernel.h"
#include "runtime/parallel.h"
#include "runtime/prepared_kernels.h"
#include "runtime/step_scheduler.h"
#include "runtime/storage.h"

namespace mf::runtime {
namespace {

// One step with everything bound: the kernel, its attributes and the views of its operands.
struct BoundStep {
  const Step* step = nullptr;
  const ir::KernelFn* kernel = nullptr;  // null for control flow
  const ir::Attrs* attrs = nullptr;
  std::string_view op;
  std::vector<ir::TensorView> inputs;
  std::vector<ir::TensorView> outputs;
  const void* prepared = nullptr;  // KernelContext::prepared (runtime/prepared_kernels.h)
};

// A view whose pointer changes every run (a parameter, a graph output or a pooled intermediate).
struct Patch {
  size_t step = 0;
  bool output = false;
  size_t operand = 0;
};

// Runs a plan as a flat loop over pre-bound kernels with one arena kept across runs.
// One run at a time (runs serialise on a mutex, since they share the arena). With
// inter_op_parallelism > 1 independent steps run at once, in the order the plan's depends_on
// allows (data, side effects, and arena ranges reused by later steps), like KernelExecutor.
class SinkExecutor final : public GraphExecutor {
 public:
  explicit SinkExecutor(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {
    MF_CHECK(plan_ != nullptr && plan_->graph != nullptr, InvalidArgument,
             "SinkExecutor needs a plan built from a graph");
    validate();
    bind_steps();
  }

  std::vector<TensorArg> run(std::span<const TensorArg> inputs,
                             const RunOptions& options) override {
    std::lock_guard<std::mutex> lock(mutex_);
    detail::check_inputs(*plan_, inputs);
    MemoryPool& pool = detail::pool_of(options);
    if (!prepared_) prepare(pool);

    for (size_t i = 0; i < inputs.size(); ++i) {
      // The caller's tensors are not written during the run: their identity holds for it
      // (TensorView::content_id).
      point(plan_->parameters[i], inputs[i].buffer->data(), inputs[i].buffer->content_identity());
    }
    // Graph outputs get fresh buffers: the caller keeps them after the run.
    std::vector<std::shared_ptr<Buffer>> output_buffers(plan_->slots.size());
    for (int id : output_slots_) {
      output_buffers[id] = pool.allocate(std::max(plan_->slots[id].bytes, kTensorAlignment),
                                         plan_->graph->name() + " output");
      point(id, output_buffers[id]->data());
    }

    pooled_.assign(plan_->slots.size(), nullptr);
    struct Drop {  // an error mid-run gives the intermediates back too
      std::vector<std::shared_ptr<Buffer>>& buffers;
      ~Drop() { buffers.assign(buffers.size(), nullptr); }
    } drop{pooled_};
    if (options.inter_op_parallelism > 1 && steps_.size() > 1) {
      run_parallel(options, pool);
    } else {
      ScopedIntraOpThreads threads(options.intra_op_threads);
      for (BoundStep& b : steps_) {
        run_step(b, options, pool);
        for (int slot : b.step->release_after) pooled_[slot].reset();
      }
    }

    std::vector<TensorArg> out;
    std::vector<bool> handed(plan_->slots.size(), false);
    for (int id : plan_->outputs) {
      const Slot& slot = plan_->slots[id];
      if (output_buffers[id] != nullptr && !handed[id]) {
        handed[id] = true;
        out.push_back({slot.type, output_buffers[id]});
        continue;
      }
      // A parameter, a constant or a repeated output: a copy of its own.
      auto buffer = pool.allocate(std::max(slot.bytes, kTensorAlignment), "output");
      detail::copy_payload(buffer->data(), data_[id], slot.type);
      out.push_back({slot.type, std::move(buffer)});
    }
    return out;
  }

  std::string_view name() const override { return "SinkExecutor"; }

  size_t prepare_kernels(int threads, bool deterministic) override {
    std::lock_guard<std::mutex> lock(mutex_);
    kernels_ = std::make_unique<PreparedKernels>(*plan_, threads, deterministic);
    for (BoundStep& b : steps_) b.prepared = kernels_->state(*b.step->node);
    return kernels_->prepared();
  }

 private:
  // Every bound view of slot `id` now reads or writes `data`, whose content identity is `content`
  // ({0, 0}: memory the run writes).
  void point(int id, void* data, std::pair<uint64_t, uint64_t> content = {0, 0}) {
    data_[id] = data;
    for (const Patch& p : patches_[id]) {
      ir::TensorView& view = (p.output ? steps_[p.step].outputs : steps_[p.step].inputs)[p.operand];
      view.data = data;
      view.content_id = content.first;
      view.content_version = content.second;
      view.parameter = content.first != 0;
    }
  }

  // `readers`: in a parallel run, per slot the steps still to read it; null in a serial run.
  void run_step(BoundStep& b, const RunOptions& options, MemoryPool& pool,
                const std::atomic<int>* readers = nullptr) {
    // The step's pooled intermediates, from the pool now (memory O0), or an in-place step's input
    // buffer (detail::takes_input_buffer).
    const Step& step = *b.step;
    for (int id : step.outputs) {
      if (!pooled_intermediate(id)) continue;
      pooled_[id] = detail::takes_input_buffer(step, id, readers)
                        ? pooled_[step.inputs[0]]
                        : pool.allocate(std::max(plan_->slots[id].bytes, kTensorAlignment), b.op);
      point(id, pooled_[id]->data());
    }
    try {
      if (b.kernel != nullptr) {
        (*b.kernel)(ir::KernelContext{b.inputs, b.outputs, *b.attrs, b.op, options.deterministic,
                                      b.prepared});
      } else {
        run_control_flow(b, options);
      }
    } catch (...) {
      detail::rethrow_at(*plan_, *b.step);
    }
    if (options.on_step) options.on_step(*b.step->node);
  }

  bool pooled_intermediate(int id) const {
    const Slot& slot = plan_->slots[id];
    return slot.kind == SlotKind::kPooled && !slot.is_output;
  }

  // The steps as a dependency graph on `inter_op_parallelism` threads (step_scheduler.h); the first
  // error stops launching and is rethrown here. Pooled intermediates go back when their last reader
  // finishes (not at the planned step, which assumes serial order).
  void run_parallel(const RunOptions& options, MemoryPool& pool) {
    std::unique_ptr<std::atomic<int>[]> readers(new std::atomic<int>[plan_->slots.size()]);
    for (size_t id = 0; id < plan_->slots.size(); ++id) readers[id].store(readers_[id]);
    detail::run_steps_in_parallel(*plan_, options.inter_op_parallelism, [&](int s) {
      {
        ScopedIntraOpThreads threads(options.intra_op_threads);
        run_step(steps_[s], options, pool, readers.get());
      }
      for (int slot : distinct_inputs_[s]) {
        if (readers[slot].fetch_sub(1) == 1) pooled_[slot].reset();
      }
      for (int slot : plan_->steps[s].outputs) {
        if (readers[slot].load() == 0) pooled_[slot].reset();
      }
    });
  }

  void validate() const {
    const Plan& plan = *plan_;
    for (const Step& step : plan.steps) {
      MF_CHECK(step.node != nullptr && step.node->def() != nullptr, InvalidArgument,
               "SinkExecutor: a step of graph @", plan.graph->name(), " has no registered op");
      const bool control_flow = step.node->def()->has(ir::Trait::kControlFlow);
      MF_CHECK(control_flow || static_cast<bool>(step.node->def()->kernel), InvalidArgument,
               "SinkExecutor: op '", step.node->op(), "' has no kernel");
      MF_CHECK(!control_flow || is_fused(*step.node) || !step.subplans.empty(), InvalidArgument,
               "SinkExecutor: control-flow step '", step.node->op(), "' has no subplans");
      for (int id : step.inputs) {
        MF_CHECK(id >= 0 && size_t(id) < plan.slots.size(), Internal, "bad slot id ", id);
      }
      for (int id : step.outputs) {
        MF_CHECK(id >= 0 && size_t(id) < plan.slots.size(), Internal, "bad slot id ", id);
        MF_CHECK(
            plan.slots[id].kind == SlotKind::kPooled || plan.slots[id].kind == SlotKind::kArena,
            Internal, "output slot ", id, " of '", step.node->op(), "' is not writable");
      }
    }
    for (const Slot& slot : plan.slots) {
      if (slot.kind == SlotKind::kArena) {
        MF_CHECK(slot.offset + slot.bytes <= plan.arena_bytes, Internal,
                 "arena slot beyond arena_bytes");
      }
    }
  }

  void bind_steps() {
    const Plan& plan = *plan_;
    data_.assign(plan.slots.size(), nullptr);
    for (size_t id = 0; id < plan.slots.size(); ++id) {
      const Slot& slot = plan.slots[id];
      if (slot.kind == SlotKind::kConstant) {
        data_[id] = const_cast<uint8_t*>(plan.graph->constant(slot.index)->bytes().data());
      }
      if (slot.is_output) output_slots_.push_back(static_cast<int>(id));
    }
    auto varies = [&](int id) {
      return plan.slots[id].kind == SlotKind::kParameter || plan.slots[id].is_output ||
             pooled_intermediate(id);
    };
    patches_.resize(plan.slots.size());
    readers_ = detail::reader_counts(plan);
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const Step& step = plan.steps[s];
      BoundStep b;
      b.step = &step;
      b.attrs = &step.node->attrs();
      b.op = step.node->op();
      if (!step.node->def()->has(ir::Trait::kControlFlow)) b.kernel = &step.node->def()->kernel;
      if (is_fused(*step.node)) {
        // Built once here, bound like any kernel.
        std::shared_ptr<const FusedKernel> fused = make_fused_kernel(*plan.graph, *step.node);
        fused_kernels_.push_back(std::make_unique<ir::KernelFn>(
            [fused](const ir::KernelContext& ctx) { fused->run(ctx); }));
        b.kernel = fused_kernels_.back().get();
      }
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        b.inputs.push_back({nullptr, plan.slots[step.inputs[i]].type});
        if (varies(step.inputs[i])) patches_[step.inputs[i]].push_back({s, false, i});
      }
      for (size_t k = 0; k < step.outputs.size(); ++k) {
        b.outputs.push_back({nullptr, plan.slots[step.outputs[k]].type});
        if (varies(step.outputs[k])) patches_[step.outputs[k]].push_back({s, true, k});
      }
      distinct_inputs_.push_back(detail::distinct_slots(step.inputs));
      steps_.push_back(std::move(b));
    }
  }

  // First run: the arena, kept for later runs; then every view whose pointer no longer changes.
  void prepare(MemoryPool& pool) {
    const Plan& plan = *plan_;
    if (plan.arena_bytes > 0) arena_ = pool.allocate(plan.arena_bytes, "arena");
    for (size_t id = 0; id < plan.slots.size(); ++id) {
      const Slot& slot = plan.slots[id];
      if (slot.kind == SlotKind::kArena) {
        // Every intermediate empty: no arena, and no byte of one is ever touched.
        data_[id] = arena_ ? static_cast<uint8_t*>(arena_->data()) + slot.offset : nullptr;
      }
    }
    for (BoundStep& b : steps_) {
      for (size_t i = 0; i < b.inputs.size(); ++i) b.inputs[i].data = data_[b.step->inputs[i]];
      for (size_t k = 0; k < b.outputs.size(); ++k) b.outputs[k].data = data_[b.step->outputs[k]];
    }
    prepared_ = true;
  }

  void run_control_flow(const BoundStep& b, const RunOptions& options) {
    std::vector<TensorArg> args;
    for (const ir::TensorView& v : b.inputs) {
      args.push_back({v.type, wrap_external(v.data, detail::payload_bytes(v.type))});
    }
    std::vector<TensorArg> results = detail::run_control_flow(*plan_, *b.step, args, options, 0);
    for (size_t k = 0; k < b.outputs.size(); ++k) {
      detail::copy_payload(b.outputs[k].data, results[k].buffer->data(), b.outputs[k].type);
    }
  }

  std::shared_ptr<const Plan> plan_;
  std::mutex mutex_;
  std::vector<BoundStep> steps_;
  std::vector<std::vector<Patch>> patches_;        // per slot: the views that follow its pointer
  std::vector<int> readers_;                       // per slot: how many steps read it
  std::vector<std::vector<int>> distinct_inputs_;  // per step: the slots it reads, once each
  std::vector<int> output_slots_;
  std::vector<void*> data_;  // per slot; parameters, outputs and pooled slots rebound each run
  bool prepared_ = false;
  std::shared_ptr<Buffer> arena_;
  std::vector<std::shared_ptr<Buffer>> pooled_;  // this run's pooled intermediates, per slot
  std::vector<std::unique_ptr<ir::KernelFn>> fused_kernels_;  // the kernels of fused steps
  std::unique_ptr<PreparedKernels> kernels_;  // prepare_kernels(): primitives, constant state
};

}  // namespace

std::unique_ptr<GraphExecutor> make_sink_executor(std::shared_ptr<const Plan> plan) {
  return std::make_unique<SinkExecutor>(std::move(plan));
}

}  // namespace mf::runtime
