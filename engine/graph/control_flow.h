#pragma once
// Control flow that compiles: in PYNATIVE mode these run the chosen branch or loop directly; in
// GRAPH mode each branch, condition and body is traced into a subgraph of a `cond` or `while` node,
// so the decision is taken when the compiled graph runs. Tensors the functions capture from outside
// are passed to the subgraphs automatically.

#include <functional>
#include <vector>

#include "engine/tensor.h"

namespace mf::ops {

// then_fn() if pred (one element, nonzero = true) else else_fn(); both must return the same type.
Tensor cond(const Tensor& pred, const std::function<Tensor()>& then_fn,
            const std::function<Tensor()>& else_fn);

// vars = init; while (cond_fn(vars)) vars = body_fn(vars); returns vars. body_fn keeps every type.
std::vector<Tensor> while_loop(
    const std::function<Tensor(const std::vector<Tensor>&)>& cond_fn,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& body_fn,
    std::vector<Tensor> init);

}  // namespace mf::ops
