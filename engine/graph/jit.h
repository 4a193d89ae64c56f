#pragma once
// mf::jit(fn): a function of one tensor, compiled like a cell, in both modes (MindSpore 2.x's
// `@jit`). The first call traces and compiles it (per input signature and settings) with the
// context's compile settings or its own JitConfig; in PYNATIVE mode its compiled run is queued
// like one op, and the eager code around it stays op by op.

#include <functional>
#include <string>

#include "engine/nn/cell.h"

namespace mf {

class JitFunction : public nn::Cell {
 public:
  JitFunction(std::function<Tensor(const Tensor&)> fn, const nn::JitConfig& config,
              std::string name)
      : Cell(std::move(name)), fn_(std::move(fn)) {
    set_jit_config(config);
  }
  Tensor forward(const Tensor& x) override { return fn_(x); }

 private:
  std::function<Tensor(const Tensor&)> fn_;
};

inline JitFunction jit(std::function<Tensor(const Tensor&)> fn, nn::JitConfig config = {},
                       std::string name = "JitFunction") {
  return JitFunction(std::move(fn), config, std::move(name));
}

}  // namespace mf
