#include "ir/grad_builder.h"

#include "base/error.h"
#include "ir/op_def.h"

namespace mf::ir {

GradValue GradBuilder::op(std::string_view op, std::vector<GradValue> inputs, Attrs attrs) {
  std::vector<GradValue> outputs = emit(op, std::move(inputs), std::move(attrs));
  MF_CHECK(outputs.size() == 1, Internal, "a backward rule used op '", op,
           "' as one output; it has ", outputs.size());
  return outputs.front();
}

GradValue GradBuilder::reduce_to(GradValue grad, const Shape& shape) {
  const Shape& from = type(grad).shape;
  if (from == shape) return grad;
  MF_CHECK(from.size() >= shape.size(), Internal, "a gradient of shape ", shape_to_string(from),
           " cannot be reduced to ", shape_to_string(shape));
  const size_t lead = from.size() - shape.size();
  std::vector<int64_t> axes;
  for (size_t d = 0; d < from.size(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && from[d] != 1)) axes.push_back(int64_t(d));
  }
  GradValue summed =
      axes.empty() ? grad : op("reduce_sum", {grad}, {{"axes", axes}, {"keep_dims", true}});
  if (type(summed).shape == shape) return summed;
  return op("reshape", {summed}, {{"shape", std::vector<int64_t>(shape.begin(), shape.end())}});
}

GradValue GradBuilder::zeros_like(const TensorType& t) {
  return op("zeros", {},
            {{"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())}, {"dtype", t.dtype}});
}

GradValue GradBuilder::ones_like(const TensorType& t) {
  return op("ones", {},
            {{"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())}, {"dtype", t.dtype}});
}

bool carries_gradient(const OpDef* def, const TensorType& type) {
  return def != nullptr && !def->has(Trait::kNoGradient) && is_floating(type.dtype);
}

const BackwardFn& backward_rule(const OpDef* def, std::string_view op, std::string_view scope) {
  if (def != nullptr && def->backward) return def->backward;
  const bool control_flow = def != nullptr && def->has(Trait::kControlFlow);
  MF_FAIL(InvalidArgument, "op `", echo(op, 64), "` at ", echo(scope, 200), " has no gradient rule",
          control_flow ? ": a compiled while loop is not differentiated; take the gradient in "
                         "PYNATIVE mode, unroll the loop, or stop_gradient its inputs"
                       : "; stop_gradient its inputs, or differentiate another "
                         "formulation");
}

std::string gradient_scope(std::string_view forward_scope) {
  return "Gradients/" + std::string(forward_scope);
}

}  // namespace mf::ir
