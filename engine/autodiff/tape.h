#pragma once
// The PYNATIVE tape. While a GradTape lives on a thread, every op dispatched there with an input
// that depends on a watched tensor is recorded: the op, its attributes, which inputs and outputs
// carry gradients, and the forward values its backward rule declared it reads (OpDef::grad_needs;
// nothing else is held, so the rest is freed as the forward goes). gradients() applies the same
// rules as GRAPH mode's grad transform (passes/grad_transform.h), in the same order, through the
// same dispatcher: the backward runs op by op on the eager queue, asynchronously or not, with its
// errors reported as any op's; each step's saved values are dropped once it has run.
//
// Cells run op by op while a tape records, except a cell marked for jit: it runs compiled and is
// recorded as one step whose backward is its compiled gradient (nn/cell.h), unless tapes are
// nested. Tapes nest: a gradient inside a gradient records its forward and its backward on the
// outer tapes, which differentiate both (higher-order gradients).

#include <cstdint>
#include <functional>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_state.h"
#include "engine/tensor.h"
#include "ir/attribute.h"
#include "ir/op_def.h"

namespace mf::engine {

class GradTape {
 public:
  GradTape();  // records on this thread until gradients() or destruction
  ~GradTape();
  GradTape(const GradTape&) = delete;
  GradTape& operator=(const GradTape&) = delete;

  // The innermost tape recording on this thread, or null.
  static GradTape* active();
  // True while two or more tapes record on this thread: a gradient taken inside a gradient, whose
  // steps must be ops that the outer tapes see too.
  static bool nested();
  // From the dispatcher: records the op on every tape recording on this thread (each keeps it if
  // an input depends on what it watches). While an inner tape runs its backward, the outer ones
  // record the backward's ops, so they can differentiate it (a gradient of a gradient).
  static void record_on_every_tape(const ir::OpDef& def, const ir::Attrs& attrs,
                                   std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                                   std::source_location where);

  // Gradients are wanted with respect to `t` (a floating tensor; TypeError-like InvalidArgument
  // otherwise, naming `what`).
  void watch(const Tensor& t, std::string_view what);
  // From the dispatcher: an op it is about to queue (attributes with their defaults filled).
  void record(const ir::OpDef& def, const ir::Attrs& attrs, std::span<const Tensor> inputs,
              std::span<const Tensor> outputs, std::source_location where);
  // While it lives, the tape records nothing (a cell with a custom bprop runs its forward).
  class Pause {
   public:
    explicit Pause(GradTape& tape) : tape_(tape), was_(tape.recording_) { tape.recording_ = false; }
    ~Pause() { tape_.recording_ = was_; }
    Pause(const Pause&) = delete;
    Pause& operator=(const Pause&) = delete;

   private:
    GradTape& tape_;
    bool was_;
  };
  // A step y = f(inputs) whose backward is `backward(inputs, y, dy)`, giving one gradient per input
  // (undefined: none): a cell's custom bprop, or a jit cell's compiled gradient (at the current
  // scope). Inputs that carry no gradient on this tape get none.
  using CustomBackward = std::function<std::vector<Tensor>(std::span<const Tensor> inputs,
                                                           const Tensor& y, const Tensor& dy)>;
  void record_custom(std::vector<Tensor> inputs, const Tensor& y, CustomBackward backward);
  // A step y = forward(x) recorded without its ops (a recomputed cell, run with the tape paused):
  // when the backward reaches it, forward(x) runs again recording its ops, and their backward
  // runs right there, in the order the ops would have had on the tape (the same bits).
  using Replay = std::function<Tensor(const Tensor& x)>;
  void record_replay(const Tensor& x, const Tensor& y, Replay forward);
  // Stops recording and returns d(output)/d(w) for each w of `wrt`, seeded by `sens` (ones when
  // undefined; else of the output's type): zeros for a w the output does not depend on.
  std::vector<Tensor> gradients(const Tensor& output, const Tensor& sens,
                                std::span<const Tensor> wrt);

 private:
  struct Entry {
    const ir::OpDef* def = nullptr;
    ir::Attrs attrs;
    std::vector<uint64_t> input_ids;  // 0: carries no gradient
    std::vector<ir::TensorType> input_types;
    std::vector<Tensor> saved_inputs;  // the ones the rule reads; the rest undefined
    std::vector<uint64_t> output_ids;
    std::vector<ir::TensorType> output_types;
    std::vector<Tensor> saved_outputs;
    std::string scope;
    std::source_location where;
    CustomBackward custom;  // set for a custom bprop (def is null then)
    Replay replay;          // set for a recomputed step (def is null then)
  };
  class Builder;

  uint64_t id_of(const Tensor& t) const;
  uint64_t track(const Tensor& t);

  GradTape* previous_;
  bool recording_ = true;
  OpByOpScope op_by_op_;
  uint64_t next_id_ = 1;
  std::unordered_map<const TensorImpl*, std::pair<std::weak_ptr<TensorImpl>, uint64_t>> tracked_;
  std::vector<Entry> entries_;
  std::vector<Entry>* sink_ = &entries_;  // where recorded steps go (a replay's own list)
};

}  // namespace mf::engine
