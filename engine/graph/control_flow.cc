#include "engine/graph/control_flow.h"

#include "engine/graph/trace.h"

namespace mf::ops {
namespace {

bool truth(const Tensor& pred, const char* what) {
  MF_CHECK(pred.numel() == 1, InvalidArgument, what,
           ": the predicate must hold one element, got shape ", ir::shape_to_string(pred.shape()));
  return pred.to_doubles().front() != 0;
}

}  // namespace

Tensor cond(const Tensor& pred, const std::function<Tensor()>& then_fn,
            const std::function<Tensor()>& else_fn) {
  if (engine::Tracer* tracer = engine::Tracer::active())
    return tracer->trace_cond(pred, then_fn, else_fn);
  return truth(pred, "cond") ? then_fn() : else_fn();
}

std::vector<Tensor> while_loop(
    const std::function<Tensor(const std::vector<Tensor>&)>& cond_fn,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& body_fn,
    std::vector<Tensor> init) {
  if (engine::Tracer* tracer = engine::Tracer::active())
    return tracer->trace_while(cond_fn, body_fn, init);
  std::vector<Tensor> vars = std::move(init);
  while (truth(cond_fn(vars), "while_loop")) {
    std::vector<Tensor> next = body_fn(vars);
    MF_CHECK(next.size() == vars.size(), InvalidArgument, "while_loop: the body returns ",
             next.size(), " tensors for ", vars.size(), " loop variables");
    vars = std::move(next);
  }
  return vars;
}

}  // namespace mf::ops
