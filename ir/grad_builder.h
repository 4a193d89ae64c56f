#pragma once
// An op's backward rule (OpDef::backward) and what it builds with. Given the forward node's inputs,
// outputs and the gradients flowing into its outputs, a rule emits registry ops that compute the
// gradients of its inputs. A rule sees values only through GradBuilder, so one rule serves three
// builders: GRAPH mode's grad transform (the ops become nodes of the differentiated graph), the
// PYNATIVE tape (the ops run one by one on the eager queue) and the conformance test (the ops run
// on their double references, checked against finite differences).

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "ir/attribute.h"
#include "ir/dtype.h"
#include "ir/shape.h"

namespace mf::ir {

struct TensorType;
struct OpDef;

// A value inside one GradBuilder: a node output, an eager tensor or a reference array.
struct GradValue {
  int32_t id = -1;
  explicit operator bool() const { return id >= 0; }
};

// The forward values a rule reads, as bit masks over input and output positions (bit i: input i),
// so that everything else can be freed after the forward: the tape drops it at once, the graph's
// memory plan reuses it (MindSpore's SetUnusedInputs). Types are always available.
struct GradNeeds {
  uint32_t inputs = 0;
  uint32_t outputs = 0;
};
constexpr uint32_t kAllPositions = ~0u;

class GradBuilder {
 public:
  virtual ~GradBuilder() = default;

  // The forward node.
  virtual size_t num_inputs() const = 0;
  virtual size_t num_outputs() const = 0;
  virtual const Attrs& attrs() const = 0;
  virtual const TensorType& input_type(size_t i) const = 0;
  virtual const TensorType& output_type(size_t k) const = 0;
  // Forward values; reading one the rule did not declare in its GradNeeds is an Internal error.
  virtual GradValue input(size_t i) = 0;
  virtual GradValue output(size_t k) = 0;
  // The gradient flowing into output k (zeros of its type when nothing downstream used it).
  virtual GradValue dout(size_t k) = 0;
  // Whether input i wants a gradient: a rule may skip the work for the others. An input the rule
  // gives no gradient gets zeros.
  virtual bool wants_grad(size_t i) const = 0;
  // The gradient of input i, of exactly input i's type (a broadcast operand's gradient goes
  // through reduce_to first). Set at most once per input.
  virtual void set_grad(size_t i, GradValue grad) = 0;

  virtual const TensorType& type(GradValue value) const = 0;
  // Applies registry op `op` to `inputs`; returns every output.
  virtual std::vector<GradValue> emit(std::string_view op, std::vector<GradValue> inputs,
                                      Attrs attrs) = 0;
  // A rank-0 constant.
  virtual GradValue scalar(double value, DType dtype) = 0;

  // Conveniences over emit().
  GradValue op(std::string_view op, std::vector<GradValue> inputs, Attrs attrs = {});
  // `grad` summed over the axes it was broadcast along to reach `shape` (numpy rules), then
  // reshaped to `shape`: the gradient of a broadcast operand. Unchanged when already `shape`.
  GradValue reduce_to(GradValue grad, const Shape& shape);
  GradValue zeros_like(const TensorType& type);
  GradValue ones_like(const TensorType& type);
};

using BackwardFn = std::function<void(GradBuilder&)>;

// What the GRAPH transform and the PYNATIVE tape share, so that both differentiate the same ops the
// same way.
//
// Whether a gradient flows through an output of `type` of `def`: a floating output of an op that is
// not kNoGradient (an unregistered op carries none).
bool carries_gradient(const OpDef* def, const TensorType& type);
// The rule of `def` or, when it has none, InvalidArgument: "op `reduce_max` at Default/net-Net has
// no gradient rule ...".
const BackwardFn& backward_rule(const OpDef* def, std::string_view op, std::string_view scope);
// The scope of the backward of a node at `forward_scope`: "Gradients/Default/net-Net/fc1-Dense".
std::string gradient_scope(std::string_view forward_scope);

}  // namespace mf::ir
