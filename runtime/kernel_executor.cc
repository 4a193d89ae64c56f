#include "runtime/executor_shared.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>

#include "base/stack_guard.h"
#include "ir/printer.h"
#include "runtime/fused_kernel.h"
#include "runtime/parallel.h"
#include "runtime/prepared_kernels.h"
#include "runtime/profiler.h"
#include "runtime/step_scheduler.h"
#include "runtime/storage.h"
#include "runtime/tsan_sync.h"

namespace mf::runtime {
namespace detail {

MemoryPool& pool_of(const RunOptions& options) {
  return options.pool != nullptr ? *options.pool : default_pool();
}

size_t payload_bytes(const ir::TensorType& type) {
  return static_cast<size_t>(ir::num_elements(type.shape)) * ir::dtype_size(type.dtype);
}

void copy_payload(void* to, const void* from, const ir::TensorType& type) {
  const size_t bytes = payload_bytes(type);
  if (bytes > 0) std::memcpy(to, from, bytes);
}

void check_inputs(const Plan& plan, std::span<const TensorArg> inputs) {
  const ir::Graph& graph = *plan.graph;
  MF_CHECK(inputs.size() == plan.parameters.size(), InvalidArgument, "graph @", graph.name(),
           " takes ", plan.parameters.size(), " inputs, got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Slot& slot = plan.slots[plan.parameters[i]];
    const std::string& name = graph.parameter(i)->name();
    MF_CHECK(inputs[i].type == slot.type, InvalidArgument, "graph @", graph.name(), ": input ", i,
             " (parameter '", name, "') is declared ", ir::type_to_string(slot.type),
             " but was given ", ir::type_to_string(inputs[i].type));
    MF_CHECK(inputs[i].buffer != nullptr, InvalidArgument, "graph @", graph.name(), ": input ", i,
             " (parameter '", name, "') has no buffer");
    MF_CHECK(inputs[i].buffer->size() >= payload_bytes(slot.type), InvalidArgument, "graph @",
             graph.name(), ": input ", i, " (parameter '", name, "') holds ",
             inputs[i].buffer->size(), " bytes, but ", ir::type_to_string(slot.type), " needs ",
             payload_bytes(slot.type));
  }
}

std::vector<int> distinct_slots(const std::vector<int>& ids) {
  std::vector<int> out = ids;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> reader_counts(const Plan& plan) {
  std::vector<int> readers(plan.slots.size(), 0);
  for (const Step& step : plan.steps) {
    for (int slot : distinct_slots(step.inputs)) ++readers[slot];
  }
  return readers;
}

bool scalar_truth(const void* data, ir::DType dtype) {
  return ir::visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T v;
    std::memcpy(&v, data, sizeof(T));
    return v != T(0);
  });
}

std::string node_context(const Plan& plan, const Step& step) {
  std::string out =
      "at node " + ir::describe_node(*plan.graph, *step.node) + " in graph @" + plan.graph->name();
  if (!step.node->scope().empty()) out += ", scope " + step.node->scope();
  if (!step.node->location().empty()) out += ", location " + step.node->location();
  return out;
}

void rethrow_at(const Plan& plan, const Step& step) {
  try {
    throw;
  } catch (Error& e) {
    e.add_context(node_context(plan, step));
    throw;
  } catch (const std::exception& e) {
    Error error(ErrorKind::kInternal, std::string("unexpected exception in a kernel: ") + e.what());
    error.add_context(node_context(plan, step));
    throw error;
  } catch (...) {
    Error error(ErrorKind::kInternal, "unknown exception in a kernel (please report it)");
    error.add_context(node_context(plan, step));
    throw error;
  }
}

std::vector<TensorArg> run_control_flow(const Plan& plan, const Step& step,
                                        std::span<const TensorArg> args, const RunOptions& options,
                                        int depth) {
  const int next = depth + 1;
  MF_CHECK(next <= options.max_call_depth, InvalidArgument, "call depth exceeds max_call_depth ",
           options.max_call_depth, " at node ", ir::describe_node(*plan.graph, *step.node),
           " in graph @", plan.graph->name(), "; raise max_call_depth or simplify the network");
  MF_CHECK(enough_stack_left(), InvalidArgument, "call depth ", next, " at node ",
           ir::describe_node(*plan.graph, *step.node), " in graph @", plan.graph->name(), ": ",
           stack_used_up_message());
  const std::string& op = step.node->op();
  const auto& subs = step.subplans;
  if (op == "call") {
    MF_CHECK(subs.size() == 1, Internal, "call needs 1 subplan, has ", subs.size());
    return run_plan(*subs[0], args, options, next);
  }
  if (op == "cond") {
    MF_CHECK(subs.size() == 2, Internal, "cond needs 2 subplans, has ", subs.size());
    const bool pred = scalar_truth(args[0].buffer->data(), args[0].type.dtype);
    return run_plan(*subs[pred ? 0 : 1], args.subspan(1), options, next);
  }
  if (op == "while") {
    MF_CHECK(subs.size() == 2, Internal, "while needs 2 subplans, has ", subs.size());
    std::vector<TensorArg> vars(args.begin(), args.end());
    for (;;) {
      std::vector<TensorArg> pred = run_plan(*subs[0], vars, options, next);
      MF_CHECK(pred.size() == 1, InvalidArgument, "while: @", subs[0]->graph->name(),
               " must return one scalar predicate");
      if (!scalar_truth(pred[0].buffer->data(), pred[0].type.dtype)) break;
      vars = run_plan(*subs[1], vars, options, next);
    }
    return vars;
  }
  MF_FAIL(Unsupported, "control-flow op '", op, "' is not supported by the graph executors");
}

namespace {

// The state of one run of one plan: where every slot's bytes are. Pooled slots own a buffer;
// parameters hold the caller's; constants and arena slots are plain pointers.
class PlanRun {
 public:
  PlanRun(const Plan& plan, const RunOptions& options, int depth)
      : plan_(plan),
        options_(options),
        pool_(pool_of(options)),
        depth_(depth),
        buffers_(plan.slots.size()),
        data_(plan.slots.size(), nullptr),
        content_(plan.slots.size(), {0, 0}) {}

  // Kernels of the plan's fused steps, built by the executor; a nested run builds its own.
  void set_fused(const FusedKernels* fused) { fused_ = fused; }
  // What the executor prepared for the plan's kernels (may be null: nothing prepared).
  void set_prepared(const PreparedKernels* prepared) { prepared_ = prepared; }

  void bind(std::span<const TensorArg> inputs) {
    check_inputs(plan_, inputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int slot = plan_.parameters[i];
      buffers_[slot] = inputs[i].buffer;
      data_[slot] = inputs[i].buffer->data();
      // The caller's tensors are not written during the run: their identity holds for it.
      content_[slot] = inputs[i].buffer->content_identity();
    }
    if (plan_.arena_bytes > 0) arena_ = pool_.allocate(plan_.arena_bytes, "arena");
    for (size_t id = 0; id < plan_.slots.size(); ++id) {
      const Slot& slot = plan_.slots[id];
      if (slot.kind == SlotKind::kConstant) {
        data_[id] = const_cast<uint8_t*>(plan_.graph->constant(slot.index)->bytes().data());
      } else if (slot.kind == SlotKind::kArena) {
        // Every intermediate empty: no arena, and no byte of one is ever touched.
        data_[id] = arena_ ? static_cast<uint8_t*>(arena_->data()) + slot.offset : nullptr;
      }
    }
  }

  void run_serial() {
    for (const Step& step : plan_.steps) {
      run_step(step);
      for (int slot : step.release_after) release(slot);
    }
  }

  // Steps start when the steps they depend on have finished, at most `parallelism` at once. Pooled
  // buffers are freed when their last reader finishes (not at the planned step, which assumes
  // serial order).
  void run_parallel(int parallelism) {
    const std::vector<int> counts = reader_counts(plan_);
    std::unique_ptr<std::atomic<int>[]> readers(new std::atomic<int>[plan_.slots.size()]);
    for (size_t id = 0; id < plan_.slots.size(); ++id) readers[id].store(counts[id]);
    readers_ = readers.get();
    run_steps_in_parallel(plan_, parallelism, [&](int s) {
      const Step& step = plan_.steps[s];
      {
        ScopedIntraOpThreads threads(options_.intra_op_threads);
        run_step(step);
      }
      for (int slot : distinct_slots(step.inputs)) {
        if (readers[slot].fetch_sub(1) == 1) release(slot);
      }
      for (int slot : step.outputs) {
        if (readers[slot].load() == 0) release(slot);
      }
    });
    readers_ = nullptr;
  }

  // Graph outputs in order, each in a buffer of its own that outlives the run.
  std::vector<TensorArg> outputs() {
    std::vector<TensorArg> out;
    std::vector<bool> handed(plan_.slots.size(), false);
    for (int id : plan_.outputs) {
      const Slot& slot = plan_.slots[id];
      if (slot.kind == SlotKind::kPooled && slot.is_output && !handed[id]) {
        handed[id] = true;
        out.push_back({slot.type, buffers_[id]});
        continue;
      }
      auto buffer = allocate(slot, "output");
      copy_payload(buffer->data(), data_[id], slot.type);
      out.push_back({slot.type, std::move(buffer)});
    }
    return out;
  }

 private:
  std::shared_ptr<Buffer> allocate(const Slot& slot, std::string_view op) {
    return pool_.allocate(std::max(slot.bytes, kTensorAlignment), op);
  }

  void release(int slot) {
    const Slot& s = plan_.slots[slot];
    if (s.kind == SlotKind::kPooled && !s.is_output) buffers_[slot].reset();
  }

  void run_step(const Step& step) {
    try {
      if (step.node->def()->has(ir::Trait::kControlFlow) && !is_fused(*step.node)) {
        run_control_flow_step(step);
      } else {
        run_kernel_step(step);
      }
    } catch (...) {
      rethrow_at(plan_, step);
    }
    if (options_.on_step) {
      std::lock_guard<std::mutex> lock(on_step_mutex_);
      options_.on_step(*step.node);
    }
  }

  void run_kernel_step(const Step& step) {
    for (int id : step.outputs) {
      const Slot& slot = plan_.slots[id];
      if (slot.kind != SlotKind::kPooled) continue;
      buffers_[id] = takes_input_buffer(step, id, readers_) ? buffers_[step.inputs[0]]
                                                            : allocate(slot, step.node->op());
      data_[id] = buffers_[id]->data();
    }
    std::vector<ir::TensorView> in;
    std::vector<ir::TensorView> out;
    in.reserve(step.inputs.size());
    out.reserve(step.outputs.size());
    for (int id : step.inputs) {
      in.push_back({data_[id], plan_.slots[id].type, content_[id].first, content_[id].second,
                    content_[id].first != 0});
    }
    for (int id : step.outputs) out.push_back({data_[id], plan_.slots[id].type});
    const ir::KernelContext ctx{in,
                                out,
                                step.node->attrs(),
                                step.node->op(),
                                options_.deterministic,
                                prepared_ != nullptr ? prepared_->state(*step.node) : nullptr};
    const KernelTimer timer(ctx, "GRAPH");
    if (is_fused(*step.node)) {
      (fused_ != nullptr ? *fused_ : own_fused_).get(*plan_.graph, *step.node).run(ctx);
      return;
    }
    step.node->def()->kernel(ctx);
  }

  void run_control_flow_step(const Step& step) {
    std::vector<TensorArg> args;
    for (int id : step.inputs) {
      const Slot& slot = plan_.slots[id];
      // Arena and constant bytes are borrowed for the nested run only.
      args.push_back({slot.type, buffers_[id] != nullptr
                                     ? buffers_[id]
                                     : wrap_external(data_[id], payload_bytes(slot.type))});
    }
    std::vector<TensorArg> results = run_control_flow(plan_, step, args, options_, depth_);
    MF_CHECK(results.size() == step.outputs.size(), Internal, "control flow returned ",
             results.size(), " values for ", step.outputs.size(), " outputs");
    for (size_t k = 0; k < results.size(); ++k) {
      const int id = step.outputs[k];
      const Slot& slot = plan_.slots[id];
      const bool borrowed = std::any_of(args.begin(), args.end(), [&](const TensorArg& a) {
        return a.buffer == results[k].buffer;
      });
      if (slot.kind == SlotKind::kPooled && !borrowed) {
        buffers_[id] = std::move(results[k].buffer);
        data_[id] = buffers_[id]->data();
        continue;
      }
      if (slot.kind == SlotKind::kPooled) {
        buffers_[id] = allocate(slot, step.node->op());
        data_[id] = buffers_[id]->data();
      }
      copy_payload(data_[id], results[k].buffer->data(), slot.type);
    }
  }

  const Plan& plan_;
  const RunOptions& options_;
  MemoryPool& pool_;
  int depth_;
  // run_parallel: per slot, the steps still to read it (a step counts down when it finishes); null
  // in a serial run.
  const std::atomic<int>* readers_ = nullptr;
  std::vector<std::shared_ptr<Buffer>> buffers_;
  std::vector<void*> data_;
  // Per slot: the content identity of a parameter bound from the caller (TensorView::content_id),
  // {0, 0} for everything the run itself writes.
  std::vector<std::pair<uint64_t, uint64_t>> content_;
  std::shared_ptr<Buffer> arena_;
  std::mutex on_step_mutex_;
  const FusedKernels* fused_ = nullptr;
  FusedKernels own_fused_;
  const PreparedKernels* prepared_ = nullptr;
};

}  // namespace

std::vector<TensorArg> run_plan(const Plan& plan, std::span<const TensorArg> inputs,
                                const RunOptions& options, int depth) {
  PlanRun run(plan, options, depth);
  run.bind(inputs);
  run.run_serial();
  return run.outputs();
}

}  // namespace detail

namespace {

// Runs a plan kernel by kernel (jit O0/O1), allocating from the pool as it goes; independent steps
// run at once with inter_op_parallelism > 1. Holds no per-run state, so it stays usable after
// errors.
class KernelExecutor final : public GraphExecutor {
 public:
  explicit KernelExecutor(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {
    MF_CHECK(plan_ != nullptr && plan_->graph != nullptr, InvalidArgument,
             "KernelExecutor needs a plan built from a graph");
    fused_ = std::make_unique<FusedKernels>(*plan_);
  }

  std::vector<TensorArg> run(std::span<const TensorArg> inputs,
                             const RunOptions& options) override {
    detail::PlanRun run(*plan_, options, 0);
    run.set_fused(fused_.get());
    run.set_prepared(prepared_.get());
    run.bind(inputs);
    if (options.inter_op_parallelism > 1 && plan_->steps.size() > 1) {
      // Nested control flow inside a step runs serially on that step's thread.
      run.run_parallel(options.inter_op_parallelism);
    } else {
      ScopedIntraOpThreads threads(options.intra_op_threads);
      run.run_serial();
    }
    return run.outputs();
  }

  std::string_view name() const override { return "KernelExecutor"; }

  size_t prepare_kernels(int threads, bool deterministic) override {
    prepared_ = std::make_unique<PreparedKernels>(*plan_, threads, deterministic);
    return prepared_->prepared();
  }

 private:
  std::shared_ptr<const Plan> plan_;
  std::unique_ptr<FusedKernels> fused_;        // built once, shared by every run
  std::unique_ptr<PreparedKernels> prepared_;  // set before the first run, then read only
};

}  // namespace

std::unique_ptr<GraphExecutor> make_kernel_executor(std::shared_ptr<const Plan> plan) {
  return std::make_unique<KernelExecutor>(std::move(plan));
}

}  // namespace mf::runtime
