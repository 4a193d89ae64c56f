#pragma once
// mf::jit(fn): a function of one tensor, compiled like a cell. In GRAPH mode the first call traces
// and compiles it (per input signature and settings); in PYNATIVE mode it runs op by op.

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
