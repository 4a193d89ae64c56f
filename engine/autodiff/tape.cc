#include "engine/autodiff/tape.h"

#include <utility>

#include "base/error.h"
#include "engine/eager/dispatch.h"
#include "engine/scope.h"
#include "ir/grad_builder.h"

namespace mf::engine {
namespace {

thread_local GradTape* active_tape = nullptr;

std::vector<int64_t> dims_of(const ir::TensorType& type) {
  return {type.shape.begin(), type.shape.end()};
}

}  // namespace

// A rule's view of one recorded op: what it emits is dispatched now, op by op.
class GradTape::Builder final : public ir::GradBuilder {
 public:
  Builder(const Entry& entry, std::vector<Tensor> douts, std::vector<bool> wants)
      : entry_(entry),
        douts_(std::move(douts)),
        wants_(std::move(wants)),
        grads_(entry.input_types.size()) {}

  size_t num_inputs() const override { return entry_.input_types.size(); }
  size_t num_outputs() const override { return entry_.output_types.size(); }
  const ir::Attrs& attrs() const override { return entry_.attrs; }
  const ir::TensorType& input_type(size_t i) const override { return entry_.input_types.at(i); }
  const ir::TensorType& output_type(size_t k) const override { return entry_.output_types.at(k); }
  ir::GradValue input(size_t i) override {
    check_declared(entry_.def->grad_needs.inputs, i, "input");
    return add(entry_.saved_inputs.at(i));
  }
  ir::GradValue output(size_t k) override {
    check_declared(entry_.def->grad_needs.outputs, k, "output");
    return add(entry_.saved_outputs.at(k));
  }
  ir::GradValue dout(size_t k) override {
    MF_CHECK(k < douts_.size(), Internal, "dout(", k, ") of op ", entry_.def->name);
    if (!douts_[k].defined()) {
      douts_[k] = values_.at(size_t(zeros_like(entry_.output_types[k]).id));
    }
    return add(douts_[k]);
  }
  bool wants_grad(size_t i) const override { return i < wants_.size() && wants_[i]; }
  void set_grad(size_t i, ir::GradValue grad) override {
    MF_CHECK(i < grads_.size() && !grads_[i].defined(), Internal, "the backward rule of ",
             entry_.def->name, " set the gradient of input ", i, " twice or out of range");
    const Tensor& g = values_.at(size_t(grad.id));
    MF_CHECK(g.type() == entry_.input_types[i], Internal, "the backward rule of ", entry_.def->name,
             " gave input ", i, " a gradient of type ", ir::type_to_string(g.type()),
             " for an input of type ", ir::type_to_string(entry_.input_types[i]));
    grads_[i] = g;
  }
  const ir::TensorType& type(ir::GradValue value) const override {
    return values_.at(size_t(value.id)).type();
  }
  std::vector<ir::GradValue> emit(std::string_view op, std::vector<ir::GradValue> inputs,
                                  ir::Attrs attrs) override {
    std::vector<Tensor> operands;
    operands.reserve(inputs.size());
    for (ir::GradValue g : inputs) operands.push_back(values_.at(size_t(g.id)));
    std::vector<ir::GradValue> outputs;
    for (Tensor& t : call_op(op, operands, std::move(attrs), entry_.where)) {
      outputs.push_back(add(std::move(t)));
    }
    return outputs;
  }
  ir::GradValue scalar(double value, ir::DType dtype) override {
    return add(Tensor::full({}, value, dtype));
  }

  std::vector<Tensor>& grads() { return grads_; }

 private:
  ir::GradValue add(Tensor t) {
    values_.push_back(std::move(t));
    return ir::GradValue{int32_t(values_.size() - 1)};
  }
  void check_declared(uint32_t mask, size_t position, const char* what) const {
    MF_CHECK(position < 32 && (mask >> position & 1u) != 0, Internal, "the backward rule of ",
             entry_.def->name, " reads its ", what, " ", position,
             " without declaring it in its GradNeeds");
  }

  const Entry& entry_;
  std::vector<Tensor> douts_;
  std::vector<bool> wants_;
  std::vector<Tensor> grads_;
  std::vector<Tensor> values_;
};

GradTape::GradTape() : previous_(active_tape) {
  active_tape = this;
}

GradTape::~GradTape() {
  if (active_tape == this) active_tape = previous_;
}

GradTape* GradTape::active() {
  for (GradTape* tape = active_tape; tape != nullptr; tape = tape->previous_) {
    if (tape->recording_) return tape;
  }
  return nullptr;
}

bool GradTape::nested() {
  int recording = 0;
  for (GradTape* tape = active_tape; tape != nullptr; tape = tape->previous_) {
    recording += tape->recording_ ? 1 : 0;
  }
  return recording > 1;
}

void GradTape::record_on_every_tape(const ir::OpDef& def, const ir::Attrs& attrs,
                                    std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                                    std::source_location where) {
  for (GradTape* tape = active_tape; tape != nullptr; tape = tape->previous_) {
    if (tape->recording_) tape->record(def, attrs, inputs, outputs, where);
  }
}

uint64_t GradTape::id_of(const Tensor& t) const {
  if (!t.defined()) return 0;
  auto it = tracked_.find(t.impl().get());
  if (it == tracked_.end() || it->second.first.lock() != t.impl()) return 0;
  return it->second.second;
}

uint64_t GradTape::track(const Tensor& t) {
  const uint64_t id = next_id_++;
  tracked_[t.impl().get()] = {t.impl(), id};
  return id;
}

void GradTape::watch(const Tensor& t, std::string_view what) {
  MF_CHECK(t.defined(), InvalidArgument, "cannot take the gradient of ", echo(what),
           ": the tensor is undefined");
  MF_CHECK(ir::is_floating(t.dtype()), InvalidArgument, "cannot take the gradient of ", echo(what),
           " of type ", ir::type_to_string(t.type()), ": only floating tensors have gradients");
  if (id_of(t) == 0) track(t);
}

void GradTape::record(const ir::OpDef& def, const ir::Attrs& attrs, std::span<const Tensor> inputs,
                      std::span<const Tensor> outputs, std::source_location where) {
  Entry entry;
  bool reached = false;
  for (const Tensor& t : inputs) {
    entry.input_ids.push_back(id_of(t));
    reached = reached || entry.input_ids.back() != 0;
  }
  if (!reached) return;
  bool carries = false;
  for (const Tensor& t : outputs) carries = carries || ir::carries_gradient(&def, t.type());
  if (!carries) return;
  entry.def = &def;
  entry.attrs = attrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    entry.input_types.push_back(inputs[i].type());
    const bool read = i < 32 && (def.grad_needs.inputs >> i & 1u) != 0;
    entry.saved_inputs.push_back(read ? inputs[i] : Tensor());
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    entry.output_types.push_back(outputs[k].type());
    entry.output_ids.push_back(ir::carries_gradient(&def, outputs[k].type()) ? track(outputs[k])
                                                                             : 0);
    const bool read = k < 32 && (def.grad_needs.outputs >> k & 1u) != 0;
    entry.saved_outputs.push_back(read ? outputs[k] : Tensor());
  }
  entry.scope = current_scope();
  entry.where = where;
  sink_->push_back(std::move(entry));
}

void GradTape::record_custom(std::vector<Tensor> inputs, const Tensor& y, CustomBackward backward) {
  if (!recording_ || !y.defined() || !ir::is_floating(y.dtype())) return;
  Entry entry;
  bool reached = false;
  for (const Tensor& t : inputs) {
    entry.input_ids.push_back(id_of(t));
    entry.input_types.push_back(t.type());
    reached = reached || entry.input_ids.back() != 0;
  }
  if (!reached) return;
  entry.saved_inputs = std::move(inputs);
  entry.output_types = {y.type()};
  entry.output_ids = {track(y)};
  entry.saved_outputs = {y};
  entry.scope = current_scope();
  entry.where = std::source_location::current();
  entry.custom = std::move(backward);
  sink_->push_back(std::move(entry));
}

void GradTape::record_replay(const Tensor& x, const Tensor& y, Replay forward) {
  if (!recording_ || !x.defined() || !y.defined() || !ir::is_floating(y.dtype())) return;
  Entry entry;
  entry.input_ids = {id_of(x)};
  entry.input_types = {x.type()};
  entry.saved_inputs = {x};
  entry.output_types = {y.type()};
  entry.output_ids = {track(y)};
  entry.saved_outputs = {Tensor()};  // computed again when needed
  entry.scope = current_scope();
  entry.where = std::source_location::current();
  entry.replay = std::move(forward);
  sink_->push_back(std::move(entry));
}

std::vector<Tensor> GradTape::gradients(const Tensor& output, const Tensor& sens,
                                        std::span<const Tensor> wrt) {
  recording_ = false;
  MF_CHECK(output.defined() && ir::is_floating(output.dtype()), InvalidArgument,
           "cannot differentiate an output of type ",
           output.defined() ? ir::type_to_string(output.type()) : std::string("(undefined)"),
           ": gradients are taken of floating outputs");
  // The gradient sums: a value's contributions are added as they arrive, the earlier sum first
  // (as the GRAPH transform adds them).
  std::unordered_map<uint64_t, Tensor> sums;
  const auto add = [&](uint64_t id, Tensor contribution, std::source_location where) {
    auto [it, fresh] = sums.try_emplace(id, contribution);
    if (!fresh)
      it->second = call_op("add", std::vector<Tensor>{it->second, contribution}, {}, where)[0];
  };
  const uint64_t output_id = id_of(output);
  if (output_id != 0) {
    const ScopeOverride scope("Gradients/Default");
    Tensor seed = sens;
    if (!seed.defined()) {
      seed = call_op("ones", {}, {{"shape", dims_of(output.type())}, {"dtype", output.dtype()}})[0];
    }
    MF_CHECK(seed.type() == output.type(), InvalidArgument, "the sensitivity has type ",
             ir::type_to_string(seed.type()), "; the output it seeds has type ",
             ir::type_to_string(output.type()));
    add(output_id, seed, std::source_location::current());
  }
  // One recorded step's backward; a replayed step runs its forward again, recording into a list
  // of its own, and goes through that list's steps right here.
  std::function<void(Entry&)> backward_of = [&](Entry& entry) {
    std::vector<Tensor> douts(entry.output_ids.size());
    bool any_dout = false;
    for (size_t k = 0; k < douts.size(); ++k) {
      auto found = entry.output_ids[k] == 0 ? sums.end() : sums.find(entry.output_ids[k]);
      if (found == sums.end()) continue;
      douts[k] = std::move(found->second);
      sums.erase(found);  // no earlier op adds to an output of this one
      any_dout = true;
    }
    if (any_dout && entry.replay) {
      std::vector<Entry> replayed;
      Tensor y;
      {
        struct Recording {
          GradTape& tape;
          std::vector<Entry>* sink;
          ~Recording() {
            tape.recording_ = false;
            tape.sink_ = sink;
          }
        } restore{*this, sink_};
        sink_ = &replayed;
        recording_ = true;
        const ScopeOverride scope(entry.scope);
        y = entry.replay(entry.saved_inputs[0]);
      }
      const uint64_t id = id_of(y);
      if (id != 0) {
        add(id, std::move(douts[0]), entry.where);
        for (auto r = replayed.rbegin(); r != replayed.rend(); ++r) backward_of(*r);
      }
    } else if (any_dout && entry.custom) {
      const ScopeOverride scope(ir::gradient_scope(entry.scope));
      std::vector<Tensor> grads =
          entry.custom(entry.saved_inputs, entry.saved_outputs[0], douts[0]);
      MF_CHECK(grads.size() == entry.input_ids.size(), Internal, "a custom backward gave ",
               grads.size(), " gradients for ", entry.input_ids.size(), " inputs");
      for (size_t i = 0; i < grads.size(); ++i) {
        if (grads[i].defined() && entry.input_ids[i] != 0) {
          add(entry.input_ids[i], std::move(grads[i]), entry.where);
        }
      }
    } else if (any_dout) {
      std::vector<bool> wants(entry.input_ids.size());
      for (size_t i = 0; i < wants.size(); ++i) wants[i] = entry.input_ids[i] != 0;
      const ir::BackwardFn& rule = ir::backward_rule(entry.def, entry.def->name, entry.scope);
      const ScopeOverride scope(ir::gradient_scope(entry.scope));
      Builder builder(entry, std::move(douts), std::move(wants));
      rule(builder);
      for (size_t i = 0; i < entry.input_ids.size(); ++i) {
        if (builder.grads()[i].defined() && entry.input_ids[i] != 0) {
          add(entry.input_ids[i], std::move(builder.grads()[i]), entry.where);
        }
      }
    }
    entry = Entry();  // its saved values go now
  };
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) backward_of(*it);
  std::vector<Tensor> results;
  for (const Tensor& w : wrt) {
    const uint64_t id = id_of(w);
    auto found = id == 0 ? sums.end() : sums.find(id);
    if (found != sums.end()) {
      results.push_back(found->second);
    } else {
      const ScopeOverride scope("Gradients/Default");
      results.push_back(
          call_op("zeros", {}, {{"shape", dims_of(w.type())}, {"dtype", w.dtype()}})[0]);
    }
  }
  entries_.clear();
  tracked_.clear();
  return results;
}

}  // namespace mf::engine
