#include "engine/nn/cell.h"

#include <atomic>

#include <unordered_set>
#include <utility>

#include "engine/autodiff/grad.h"
#include "engine/autodiff/tape.h"
#include "engine/engine_state.h"
#include "engine/graph/graph_mode.h"
#include "engine/graph/trace.h"
#include "engine/scope.h"

namespace mf::nn {

Cell::Cell(std::string class_name)
    : class_name_(std::move(class_name)), compiled_(std::make_unique<engine::CompiledForms>()) {}

Cell::~Cell() {
  for (auto& [name, child] : children_) {
    if (child != nullptr && child->adopter_ == this) child->adopter_ = nullptr;
  }
}

std::string Cell::parameter_name_prefix() const {
  // Iterative, and bounded by a visited set: a deep chain costs its depth and never the stack.
  std::vector<const Cell*> path;
  std::unordered_set<const Cell*> seen;
  for (const Cell* c = this; c->adopter_ != nullptr && seen.insert(c).second; c = c->adopter_)
    path.push_back(c);
  std::string prefix;
  for (auto it = path.rbegin(); it != path.rend(); ++it) prefix += (*it)->instance_name_ + ".";
  return prefix;
}

Cell::ExtraInputsScope::ExtraInputsScope(Cell& cell, std::vector<Tensor> extra)
    : cell_(cell), saved_(std::exchange(cell.extra_inputs_, std::move(extra))) {}

Cell::ExtraInputsScope::~ExtraInputsScope() {
  cell_.extra_inputs_ = std::move(saved_);
}

Tensor Cell::operator()(std::span<const Tensor> inputs, std::source_location where) {
  MF_CHECK(!inputs.empty(), InvalidArgument, class_name_, " was called with no input");
  for (size_t i = 0; i < inputs.size(); ++i) {
    MF_CHECK(inputs[i].defined() || (i == 0 && inputs.size() == 1), InvalidArgument, class_name_,
             ": input ", i, " is an undefined tensor");
  }
  const ExtraInputsScope scope(*this, std::vector<Tensor>(inputs.begin() + 1, inputs.end()));
  return (*this)(inputs[0], where);
}

const Tensor& Cell::extra_input(size_t i) const {
  MF_CHECK(i < extra_inputs_.size(), InvalidArgument, class_name_, " reads input ", i + 1,
           " of a call with ", extra_inputs_.size() + 1, " inputs; call it with ", i + 2,
           " or more");
  return extra_inputs_[i];
}

void Cell::check_bprop_takes_this_call() const {
  MF_CHECK(extra_inputs_.empty(), Unsupported, "the bprop of ", class_name_,
           " gives the gradient of one input, but this call has ", extra_inputs_.size() + 1,
           "; call the cell with one input, or drop its bprop to differentiate its ops");
}

Tensor Cell::operator()(const Tensor& x, std::source_location where) {
  if (engine::Tracer* tracer = engine::Tracer::active()) return tracer->call_cell(*this, x);
  if (engine::GradTape* tape = engine::GradTape::active()) {
    // Under nested tapes (a gradient of a gradient) every step must be ops the outer tapes can
    // differentiate in turn: no opaque step.
    const bool nested = engine::GradTape::nested();
    if (has_bprop()) {
      check_bprop_takes_this_call();
      MF_CHECK(!nested, Unsupported, "a gradient of a gradient through ", class_name_,
               "'s custom bprop is not supported: its bprop would run as one step; drop the bprop "
               "or take a first-order gradient");
      // The tape follows the cell as one step whose backward is bprop: its ops are not recorded.
      Tensor y;
      {
        const engine::GradTape::Pause pause(*tape);
        y = call_forward(x, where);
      }
      const auto policy = engine::current_policy();
      engine::ScopeGuard scope(instance_name_, class_name_,
                               policy->reserve_class_name_in_scope.value);
      tape->record_custom(
          {x}, y, [this](std::span<const Tensor> in, const Tensor& out, const Tensor& dout) {
            return std::vector<Tensor>{run_bprop(in[0], out, dout)};
          });
      return y;
    }
    // Both record one step with x as its only differentiable input; a call with extra inputs, or
    // under nested tapes, records its ops instead, so every input gets its gradient.
    const bool one_step = !nested && x.defined() && extra_inputs_.empty();
    if (jit_ && one_step) return run_jit_on_tape(*tape, x, where);
    if (recompute_ && one_step) {
      return run_recompute_on_tape(*tape, x, where);
    }
  }
  return call_forward(x, where);
}

Tensor Cell::call_forward(const Tensor& x, std::source_location where) {
  const auto policy = engine::current_policy();
  if (declared_input_ && x.defined()) {
    if (!declared_extra_inputs_.empty()) {
      MF_CHECK(extra_inputs_.size() == declared_extra_inputs_.size(), InvalidArgument, class_name_,
               " was declared with ", declared_extra_inputs_.size() + 1,
               " inputs by set_inputs and is called with ", extra_inputs_.size() + 1);
    }
    ir::SymbolValues symbols;  // shared: a symbol is one size across the inputs
    try {
      ir::bind_input(*declared_input_, x.dtype(), x.shape(), symbols);
      for (size_t i = 0; i < declared_extra_inputs_.size(); ++i) {
        ir::bind_input(declared_extra_inputs_[i], extra_inputs_[i].dtype(),
                       extra_inputs_[i].shape(), symbols);
      }
    } catch (Error& e) {
      e.add_context("calling " + class_name_ + " (declared by set_inputs)");
      throw;
    }
  }
  const bool op_by_op = engine::op_by_op_forced();
  const bool graph = policy->mode.value == context::ExecutionMode::kGraph;
  if (!op_by_op && (graph || jit_)) {
    if (!x.defined() && policy->precompile_only.value) return Tensor();  // nothing ran upstream
    MF_CHECK(x.defined(), InvalidArgument, class_name_, ": the input tensor is undefined");
    return engine::run_compiled_cell(*this, x, *compiled_, jit_level_, where);
  }
  engine::ScopeGuard scope(instance_name_, class_name_, policy->reserve_class_name_in_scope.value);
  return forward(x);
}

// A recomputed cell under a tape: its forward runs with the tape paused, so none of its
// activations are held; the tape keeps its input and, when the backward gets there, runs the
// forward again recording its ops and takes their backward at once.
Tensor Cell::run_recompute_on_tape(engine::GradTape& tape, const Tensor& x,
                                   std::source_location where) {
  Tensor y;
  {
    const engine::GradTape::Pause pause(tape);
    y = call_forward(x, where);
  }
  tape.record_replay(x, y, [this, where](const Tensor& in) { return call_forward(in, where); });
  return y;
}

// The gradient of a jit cell with respect to its input (when floating) and its trainable
// parameters, seeded by the output's gradient, compiled as one graph.
struct JitGradient {
  std::vector<Tensor> weights;
  bool input = false;
  std::unique_ptr<GradFunction> gradient;
};

// A jit cell called while a tape records: the forward runs compiled (one queued task, not its
// ops), and the tape records one step whose backward is the cell's gradient compiled as one graph
// (forward and backward, as GRAPH mode differentiates a cell). That graph computes the forward
// again, so the tape keeps only the cell's input between forward and backward, never its
// activations: the memory of a recomputation, for the time of one more forward.
Tensor Cell::run_jit_on_tape(engine::GradTape& tape, const Tensor& x, std::source_location where) {
  Tensor y;
  {
    const engine::GradTape::Pause pause(tape);
    const engine::OpByOpScope compiled(false);
    y = call_forward(x, where);
  }
  std::vector<Tensor> inputs{x};
  for (const auto& [name, p] : trainable_params()) {
    if (ir::is_floating(p.dtype())) inputs.push_back(p);
  }
  const auto policy = engine::current_policy();
  engine::ScopeGuard scope(instance_name_, class_name_, policy->reserve_class_name_in_scope.value);
  tape.record_custom(inputs, y,
                     [this, where](std::span<const Tensor> in, const Tensor&, const Tensor& dout) {
                       return jit_gradients(in, dout, where);
                     });
  return y;
}

std::vector<Tensor> Cell::jit_gradients(std::span<const Tensor> inputs, const Tensor& dout,
                                        std::source_location where) {
  const std::vector<Tensor> weights(inputs.begin() + 1, inputs.end());
  const bool input = ir::is_floating(inputs[0].dtype());
  bool same = jit_gradient_ != nullptr && jit_gradient_->input == input &&
              jit_gradient_->weights.size() == weights.size();
  for (size_t i = 0; same && i < weights.size(); ++i) {
    same = jit_gradient_->weights[i].impl() == weights[i].impl();
  }
  if (!same) {
    auto made = std::make_unique<JitGradient>();
    made->weights = weights;
    made->input = input;
    made->gradient = std::make_unique<GradFunction>(
        *this, GradSpec{.input = input, .weights = weights, .sens_param = true});
    jit_gradient_ = std::move(made);
  }
  const engine::OpByOpScope compiled(false);
  Gradients grads = (*jit_gradient_->gradient)(inputs[0], dout, where);
  std::vector<Tensor> out{input ? grads.input : Tensor()};
  for (Tensor& g : grads.weights) out.push_back(std::move(g));
  return out;
}

Tensor Cell::bprop(const Tensor&, const Tensor&, const Tensor&) {
  MF_FAIL(Internal, class_name_, " says it has a bprop and defines none");
}

Tensor Cell::run_bprop(const Tensor& x, const Tensor& out, const Tensor& dout) {
  Tensor dx = bprop(x, out, dout);
  MF_CHECK(dx.defined(), InvalidArgument, "The function 'bprop' of ", class_name_,
           " returned None: it must return one gradient per input");
  if (engine::current_policy()->check_bprop.value) {
    MF_CHECK(dx.shape() == x.shape(), InvalidArgument, "For 'bprop' of ", class_name_,
             ", the gradient of the 0th arg should have the same shape as the 0th arg, but the "
             "shape of the 0th arg is: ",
             ir::shape_to_string(x.shape()),
             ", the shape of the gradient is: ", ir::shape_to_string(dx.shape()), ".");
    MF_CHECK(dx.dtype() == x.dtype(), InvalidArgument, "For 'bprop' of ", class_name_,
             ", the gradient of the 0th arg should have the same dtype as the 0th arg, but the "
             "dtype of the 0th arg is: ",
             ir::dtype_name(x.dtype()),
             ", the dtype of the gradient is: ", ir::dtype_name(dx.dtype()), ".");
  }
  return dx;
}

void Cell::set_inputs(ir::SymbolicShape shape, DType dtype) {
  std::vector<std::pair<ir::SymbolicShape, DType>> one;
  one.emplace_back(std::move(shape), dtype);
  set_inputs(std::move(one));
}

void Cell::set_inputs(std::vector<std::pair<ir::SymbolicShape, DType>> inputs) {
  MF_CHECK(!inputs.empty(), InvalidArgument, class_name_,
           ".set_inputs: declare at least one input");
  std::vector<ir::InputSignature> declared;
  for (size_t i = 0; i < inputs.size(); ++i) {
    declared.push_back(checked_declaration(i, std::move(inputs[i].first), inputs[i].second));
  }
  declared_input_ = std::move(declared.front());
  declared_extra_inputs_.assign(std::make_move_iterator(declared.begin() + 1),
                                std::make_move_iterator(declared.end()));
  compiled_->clear();  // forms compiled before the declaration may not fit it
}

ir::InputSignature Cell::checked_declaration(size_t index, ir::SymbolicShape shape,
                                             DType dtype) const {
  MF_CHECK(shape.size() <= size_t(ir::kMaxRank), InvalidArgument, class_name_, ".set_inputs: rank ",
           shape.size(), " exceeds ", ir::kMaxRank);
  for (ir::SymbolicDim& dim : shape) {
    MF_CHECK(dim.size >= -1 && dim.size <= ir::kMaxTensorElements, InvalidArgument, class_name_,
             ".set_inputs: dimension ", dim.size,
             " is neither a size nor -1 (dynamic): give sizes >= 0, or None/-1");
    if (dim.known()) dim.symbol.clear();
    MF_CHECK(dim.symbol.empty() ||
                 (dim.symbol.size() <= ir::kMaxSymbolChars && ir::is_valid_ir_name(dim.symbol)),
             InvalidArgument, class_name_, ".set_inputs: symbol '", echo(dim.symbol, 64),
             "' is not a name of [A-Za-z0-9_.]");
  }
  return ir::InputSignature{index == 0 ? "x" : "x" + std::to_string(index), dtype,
                            std::move(shape)};
}

void Cell::set_jit_config(const JitConfig& config) {
  if (config.jit_level.empty()) {
    jit_level_.reset();
  } else {
    jit_level_ = context::parse_jit_level(config.jit_level);
  }
  jit_ = true;
}

std::vector<std::pair<std::string, Cell*>> Cell::named_descendants() const {
  std::vector<std::pair<std::string, Cell*>> out;
  for (const auto& [name, child] : children_) {
    out.emplace_back(name, child.get());
    for (auto& [path, cell] : child->named_descendants()) {
      out.emplace_back(name + "." + path, cell);
    }
  }
  return out;
}

Cell* Cell::find_child(std::string_view path) {
  // Segments split at '.' or '/'; a leading "Default" and this cell's own segment are optional.
  std::vector<std::string> segments;
  std::string current;
  for (char c : path) {
    if (c == '.' || c == '/') {
      if (!current.empty()) segments.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) segments.push_back(std::move(current));
  size_t first = 0;
  if (first < segments.size() && segments[first] == "Default") ++first;
  const auto matches = [](const Cell& cell, const std::string& segment) {
    return segment == cell.instance_name_ ||
           segment == cell.instance_name_ + "-" + cell.class_name_;
  };
  if (first < segments.size() && segments.size() - first > 1 && matches(*this, segments[first])) {
    ++first;
  }
  if (first == segments.size()) return nullptr;
  Cell* cell = this;
  for (size_t i = first; i < segments.size(); ++i) {
    Cell* next = nullptr;
    for (const auto& [name, child] : cell->children_) {
      if (matches(*child, segments[i])) next = child.get();
    }
    if (next == nullptr) return nullptr;
    cell = next;
  }
  return cell;
}

const engine::GraphRunReport& Cell::graph_report() const {
  return compiled_->last_report;
}

void Cell::clear_compiled() {
  compiled_->clear();
}

std::vector<std::pair<std::string, Tensor>> Cell::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_parameters("", out, false);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Cell::trainable_params() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_parameters("", out, true);
  return out;
}

Cell* Cell::owner_of(const std::string& dotted_name, std::string& leaf) {
  const size_t dot = dotted_name.find('.');
  if (dot == std::string::npos) {
    leaf = dotted_name;
    return this;
  }
  const std::string head = dotted_name.substr(0, dot);
  for (auto& [name, child] : children_) {
    if (name == head) return child->owner_of(dotted_name.substr(dot + 1), leaf);
  }
  return nullptr;
}

namespace {
std::atomic<uint64_t> trace_state_changes{0};
}  // namespace

void Cell::set_train(bool mode) {
  if (training_ != mode) trace_state_changes.fetch_add(1, std::memory_order_acq_rel);
  training_ = mode;
  for (auto& [name, child] : children_) child->set_train(mode);
}

void Cell::set_requires_grad(const std::string& dotted_name, bool requires_grad) {
  std::string leaf;
  if (Cell* owner = owner_of(dotted_name, leaf)) {
    for (size_t i = 0; i < owner->parameters_.size(); ++i) {
      if (owner->parameters_[i].first == leaf) {
        owner->requires_grad_[i] = requires_grad;
        return;
      }
    }
  }
  MF_FAIL(NotFound, class_name_, " has no parameter '", echo(dotted_name),
          "'; named_parameters() lists them");
}

void Cell::recompute(bool enable) {
  if (recompute_ != enable) trace_state_changes.fetch_add(1, std::memory_order_acq_rel);
  recompute_ = enable;
}

uint64_t Cell::trace_state_generation() {
  return trace_state_changes.load(std::memory_order_acquire);
}

std::vector<std::pair<std::string, Cell*>> Cell::named_children() const {
  std::vector<std::pair<std::string, Cell*>> out;
  for (const auto& [name, child] : children_) out.emplace_back(name, child.get());
  return out;
}

void Cell::set_parameter(const std::string& dotted_name, const Tensor& value) {
  const size_t dot = dotted_name.find('.');
  if (dot != std::string::npos) {
    const std::string head = dotted_name.substr(0, dot);
    for (auto& [name, child] : children_) {
      if (name == head) return child->set_parameter(dotted_name.substr(dot + 1), value);
    }
  } else {
    for (auto& [name, tensor] : parameters_) {
      if (name != dotted_name) continue;
      MF_CHECK(value.type() == tensor.type(), InvalidArgument, "parameter '", dotted_name, "' of ",
               class_name_, " is ", ir::type_to_string(tensor.type()), "; the new value is ",
               ir::type_to_string(value.type()));
      if (tensor.defined() && value.defined() && tensor.impl() != value.impl()) {
        // The old tensor's slot points at the new one, which joins it unless it has one of its own
        // (a parameter another cell holds too): a graph that captured any tensor this cell held
        // here binds the current one.
        const std::shared_ptr<TensorImpl>& old_impl = tensor.impl();
        if (old_impl->slot == nullptr) old_impl->slot = std::make_shared<ParameterSlot>();
        old_impl->slot->current = value.impl();
        if (value.impl()->slot == nullptr) value.impl()->slot = old_impl->slot;
      }
      tensor = value;
      if (tensor.defined()) tensor.impl()->is_parameter = true;
      return;
    }
  }
  MF_FAIL(NotFound, class_name_, " has no parameter '", dotted_name,
          "'; named_parameters() lists them");
}

Tensor& Cell::register_parameter(std::string name, Tensor value, bool requires_grad) {
  for (const auto& [existing, tensor] : parameters_) {
    MF_CHECK(existing != name, Internal, class_name_, " registers parameter '", name, "' twice");
  }
  if (value.defined()) value.impl()->is_parameter = true;
  parameters_.emplace_back(std::move(name), std::move(value));
  requires_grad_.push_back(requires_grad);
  return parameters_.back().second;
}

void Cell::adopt(std::string name, std::unique_ptr<Cell> child) {
  child->instance_name_ = name;
  child->adopter_ = this;
  children_.emplace_back(std::move(name), std::move(child));
}

void Cell::adopt_shared(std::string name, std::shared_ptr<Cell> child) {
  MF_CHECK(child != nullptr, InvalidArgument, class_name_, ": child cell '", name, "' is null");
  MF_CHECK(child.get() != this, InvalidArgument, class_name_, ": a cell cannot be its own child ('",
           name, "')");
  MF_CHECK(!child->reaches(this), InvalidArgument, class_name_, ": adopting '", echo(name),
           "' would make a cycle (this cell is one of its descendants)");
  child->instance_name_ = name;
  child->adopter_ = this;
  for (auto& [existing, held] : children_) {
    if (existing == name) {
      std::shared_ptr<Cell> dropped = std::exchange(held, std::move(child));
      // The dropped cell may live on (a Python variable holds it): it must not point here once
      // this cell is gone, unless this cell still holds it under another name.
      bool still_held = false;
      for (const auto& [other, kept] : children_) still_held = still_held || kept == dropped;
      if (dropped != nullptr && dropped->adopter_ == this && !still_held)
        dropped->adopter_ = nullptr;
      return;
    }
  }
  children_.emplace_back(std::move(name), std::move(child));
}

bool Cell::reaches(const Cell* target) const {
  // Iterative and visiting each shared cell once: a chain of thousands of nested cells is checked
  // in time linear in its size, and the check cannot run out of stack.
  std::vector<const Cell*> pending{this};
  std::unordered_set<const Cell*> seen{this};
  while (!pending.empty()) {
    const Cell* cell = pending.back();
    pending.pop_back();
    for (const auto& [name, child] : cell->children_) {
      if (child.get() == target) return true;
      if (seen.insert(child.get()).second) pending.push_back(child.get());
    }
  }
  return false;
}

void Cell::collect_parameters(const std::string& prefix,
                              std::vector<std::pair<std::string, Tensor>>& out,
                              bool trainable_only) const {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (trainable_only && !requires_grad_[i]) continue;
    out.emplace_back(prefix + parameters_[i].first, parameters_[i].second);
  }
  for (const auto& [name, child] : children_) {
    child->collect_parameters(prefix + name + ".", out, trainable_only);
  }
}

}  // namespace mf::nn
