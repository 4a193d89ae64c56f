#include "engine/eager/dispatch.h"

#include "engine/autodiff/tape.h"

#include <algorithm>
#include <atomic>
#include <optional>

#include "engine/eager/eager_layout.h"
#include "engine/eager/pynative_recorder.h"
#include "engine/engine_state.h"
#include "engine/graph/trace.h"
#include "engine/scope.h"
#include "ir/op_def.h"
#include "runtime/eager_executor.h"
#include "runtime/memory_pool.h"
#include "runtime/profiler.h"

namespace mf::engine {
namespace {

std::string describe_types(std::span<const ir::TensorType> types) {
  std::string text;
  for (const auto& t : types) text += (text.empty() ? "" : ", ") + ir::type_to_string(t);
  return "(" + text + ")";
}

// call_op; `given_up`, when not null, holds the caller's handles to `inputs`, dropped once the op
// is queued.
std::vector<Tensor> dispatch(std::string_view op, std::span<const Tensor> inputs, ir::Attrs attrs,
                             std::source_location where, std::vector<Tensor>* given_up) {
  if (Tracer* tracer = Tracer::active()) return tracer->record(op, inputs, std::move(attrs), where);
  const auto policy = current_policy();
  const ir::OpDef& def = ir::get_op(op);

  std::vector<ir::TensorType> input_types;
  input_types.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() && policy->precompile_only.value) {
      // precompile_only: a jit-compiled part upstream was compiled, not run; nothing computes
      // from its value, so everything downstream of it is skipped too.
      return std::vector<Tensor>(def.num_outputs > 0 ? size_t(def.num_outputs) : 1);
    }
    MF_CHECK(inputs[i].defined(), InvalidArgument, op, ": input ", i,
             " is an undefined tensor (a jit-compiled part returns none under precompile_only)");
    input_types.push_back(inputs[i].type());
  }
  std::vector<ir::TensorType> output_types;
  try {
    output_types = def.infer_types(input_types, attrs);
  } catch (Error& e) {
    e.add_context("in op '" + std::string(op) + "' with inputs " + describe_types(input_types) +
                  " at scope " + current_scope() + ", called from " +
                  runtime::format_call_site(where));
    throw;
  }
  // The tape records the op as the user called it (defaults filled), before the layout below may
  // rewrite its attributes for the kernel.
  GradTape* const tape = GradTape::active();
  std::optional<ir::Attrs> recorded_attrs;
  if (tape != nullptr) recorded_attrs = attrs;

  // Where the values live between eager ops: a convolution may leave its output channels-last
  // for the next one, and what cannot read that order gets a plain copy first.
  const bool writes_input = def.has(ir::Trait::kWritesInput);
  if (writes_input && inputs[0].impl()->channels_last) {
    // The op writes the variable's own bytes: they are made plain first (a sync point).
    Tensor variable = inputs[0];
    variable.mutable_raw_data();
  }
  std::vector<bool> channels_last(inputs.size(), false);
  bool any_channels_last = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    channels_last[i] = inputs[i].impl()->channels_last;
    any_channels_last = any_channels_last || channels_last[i];
  }
  std::vector<KernelOperand> in, out;
  in.reserve(inputs.size());
  std::vector<ir::TensorType> kernel_outputs = output_types;
  std::vector<bool> outputs_channels_last(output_types.size(), false);
  if (policy->eager_channels_last.value || any_channels_last) {
    EagerLayout layout =
        plan_eager_layout(def, input_types, channels_last, attrs, output_types,
                          policy->eager_channels_last.value, policy->deterministic.value);
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor stored = inputs[i];
      if (layout.convert[i] == EagerLayout::Convert::kToPlain) stored = plain_tensor(stored, where);
      if (layout.convert[i] == EagerLayout::Convert::kToChannelsLast) {
        stored = channels_last_tensor(stored, where);
      }
      in.push_back({stored.impl(), layout.kernel_inputs[i]});
    }
    attrs = std::move(layout.attrs);
    for (size_t i = 0; i < output_types.size(); ++i) {
      outputs_channels_last[i] = layout.flags_output(output_types[i].shape);
    }
    kernel_outputs = std::move(layout.kernel_outputs);
  } else {
    for (const Tensor& t : inputs) in.push_back({t.impl(), t.type()});
  }

  std::vector<Tensor> outputs;
  outputs.reserve(output_types.size());
  for (size_t i = 0; i < output_types.size(); ++i) {
    auto impl = std::make_shared<TensorImpl>();
    impl->type = output_types[i];
    impl->channels_last = outputs_channels_last[i];
    out.push_back({impl, kernel_outputs[i]});
    outputs.emplace_back(std::move(impl));
  }
  // An elementwise op may write its output over an input that nothing else reads any more; the
  // task checks that when it runs (KernelOperand::output_may_take_it).
  if (out.size() == 1) {
    for (size_t i = 0; i < in.size(); ++i) in[i].output_may_take_it = def.may_write_over_input(i);
  }
  // Before the submit: the task may write over an input the tape still needs, unless it holds it.
  if (tape != nullptr) GradTape::record_on_every_tape(def, *recorded_attrs, inputs, outputs, where);
  if (given_up != nullptr) given_up->clear();
  submit_kernel(def, std::move(attrs), std::move(in), std::move(out), policy->deterministic.value,
                runtime::TaskInfo{std::string(op), current_scope(), where});
  // What a kernel derived from the variable's bytes (keyed by their version) is stale now.
  if (writes_input && inputs[0].impl()->buffer) inputs[0].impl()->buffer->mark_written();
  return outputs;
}

}  // namespace

std::vector<Tensor> call_op(std::string_view op, std::span<const Tensor> inputs, ir::Attrs attrs,
                            std::source_location where) {
  return dispatch(op, inputs, std::move(attrs), where, nullptr);
}

std::vector<Tensor> call_op_reusing_inputs(std::string_view op, std::vector<Tensor> inputs,
                                           ir::Attrs attrs, std::source_location where) {
  return dispatch(op, inputs, std::move(attrs), where, &inputs);
}

void submit_kernel(const ir::OpDef& def, ir::Attrs attrs, std::vector<KernelOperand> inputs,
                   std::vector<KernelOperand> outputs, bool deterministic, runtime::TaskInfo info) {
  // Outputs get their memory when the task runs, not now: a task waiting in the asynchronous queue
  // holds no output buffer (with them taken at submission, the queued op's outputs were alive
  // beside the running op's: the sample transformer op by op peaked at 26 MiB asynchronously
  // against 18 MiB synchronously). Readers wait for ready_seq before they touch the buffer, as for
  // a jit-compiled run's output. An allocation failure is then the task's error, reported at the
  // next sync point asynchronously, at the call synchronously.
  //
  // The task owns what it touches: inputs stay alive until the kernel has run, whatever the caller
  // does.
  std::vector<std::shared_ptr<TensorImpl>> output_impls;
  for (const auto& o : outputs) output_impls.push_back(o.impl);
  auto task = [&def, attrs = std::move(attrs), inputs = std::move(inputs),
               outputs = std::move(outputs), deterministic] {
    bool wrote_over_an_input = false;
    for (const auto& o : outputs) {
      // An input of the output's type and order that this task alone holds: no tensor, no other
      // queued op and no copy can read it again, and none can get hold of it now.
      for (const auto& i : inputs) {
        if (i.output_may_take_it && i.impl.use_count() == 1 && i.kernel_type == o.kernel_type &&
            i.impl->channels_last == o.impl->channels_last && i.impl->buffer->owns_its_bytes()) {
          // use_count() is a relaxed load; the fence orders this task's writes after whatever the
          // last other owner did with the bytes before it let go (its release decrement).
          std::atomic_thread_fence(std::memory_order_acquire);
          o.impl->buffer = i.impl->buffer;
          wrote_over_an_input = true;
          break;
        }
      }
      if (o.impl->buffer != nullptr) continue;
      const size_t bytes =
          size_t(ir::num_elements(o.kernel_type.shape)) * ir::dtype_size(o.kernel_type.dtype);
      // From the pool directly: the policy (max_device_memory) was applied when the op was
      // dispatched, and the worker thread does not read the context.
      o.impl->buffer = runtime::default_pool().allocate(std::max<size_t>(bytes, 1), def.name);
    }
    std::vector<ir::TensorView> in, out;
    in.reserve(inputs.size());
    out.reserve(outputs.size());
    for (const auto& i : inputs) {
      // An eager tensor's bytes are written once, by the task that made it (or through
      // mutable_raw_data, which moves the version): a kernel may keep what it derives from them.
      const auto [id, version] = i.impl->buffer->content_identity();
      in.push_back({i.impl->buffer->data(), i.kernel_type, id, version, i.impl->is_parameter});
    }
    for (const auto& o : outputs) out.push_back({o.impl->buffer->data(), o.kernel_type});
    ir::KernelContext context{in, out, attrs, def.name, deterministic};
    {
      const runtime::KernelTimer timer(context, "PYNATIVE");
      def.kernel(context);
    }
    // New bytes under the same buffer: nothing derived from the old ones may be used again.
    if (wrote_over_an_input) {
      for (const auto& o : outputs) o.impl->buffer->mark_written();
    }
  };
  // The number submit() will hand out, recorded first so a synchronous failure finds its op in the
  // report (two threads submitting at once may swap two numbers there; nothing else reads them).
  const uint64_t next = runtime::default_eager_executor().last_submitted() + 1;
  record_pynative_op(next, info);
  const uint64_t seq = with_pynative_recorder(
      [&] { return runtime::default_eager_executor().submit(std::move(task), std::move(info)); });
  for (auto& impl : output_impls) impl->ready_seq = seq;
}

void sync() {
  with_pynative_recorder([] { runtime::default_eager_executor().sync(); });
}

}  // namespace mf::engine
