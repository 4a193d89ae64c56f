#pragma once
// The op registry interface. An op is one declarative record (OpDef): name, arity, attribute
// schema, traits, type/shape inference, kernel slot, elementwise math, scalar reference and sample
// shapes. Ops register themselves from runtime/ops/*.cc; passes ask about traits, never about op
// names.

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attribute.h"
#include "ir/dtype.h"
#include "ir/grad_builder.h"
#include "ir/shape.h"

namespace mf::ir {

class Graph;
class Node;
class Value;

// The static type of one tensor value.
struct TensorType {
  DType dtype = DType::kFloat32;
  Shape shape;
  bool operator==(const TensorType&) const = default;
};
std::string type_to_string(const TensorType& type);  // "<Tensor[Float32], (64, 784)>"

enum class Trait : uint32_t {
  kNone = 0,
  kElementwise = 1u << 0,  // output[i] depends only on inputs[i] (after broadcasting)
  kBroadcast = 1u << 1,    // inputs broadcast numpy-style to the output shape
  kReduce = 1u << 2,       // reduces along axes
  kOpaque = 1u << 3,       // never fused (matmul, conv, ...)
  kPure = 1u << 4,         // no side effects: may be folded, deduplicated, removed when unused
  kCommutative = 1u << 5,  // binary op with op(a, b) == op(b, a)
  kView = 1u << 6,         // only reinterprets shape (reshape, flatten, squeeze, expand_dims)
  kSideEffect = 1u << 7,   // must run even when unused, in program order (print)
  kComposite = 1u << 8,    // can be expanded into basic ops (gelu, softmax, layer_norm, ...)
  kControlFlow =
      1u << 9,  // call/cond/while: runs subgraphs named in attributes; types come from them
  kInPlace =
      1u << 10,       // output 0 may share input 0's bytes (each element read before it is written)
  kFused = 1u << 11,  // a fused kernel: runs the body subgraph named by "graph" through the
                      // fused-kernel evaluator (runtime/fused_kernel.h), never op by op
  kNoGradient =
      1u << 12,  // not differentiable: no gradient flows through its outputs (comparisons,
                 // stop_gradient, print); other float ops need a backward rule
  kWritesInput = 1u << 13,  // writes input 0's bytes in place (assign): its tensor is a
                            // variable; callers mark that buffer written after the op runs
};
constexpr Trait operator|(Trait a, Trait b) {
  return Trait(uint32_t(a) | uint32_t(b));
}
constexpr bool has_trait(Trait set, Trait t) {
  return (uint32_t(set) & uint32_t(t)) != 0;
}

struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<AttrValue> default_value;  // absent: required
  std::string doc;
};

// A contiguous row-major buffer that a kernel reads or writes.
struct TensorView {
  void* data = nullptr;
  TensorType type;
  // Nonzero when the bytes at `data` stay as they are for as long as (content_id, content_version)
  // does: a kernel may keep what it derives from them (weights reordered for its primitive) under
  // that key. Zero: unknown (an intermediate in memory the executor rewrites every run, or memory a
  // caller owns); nothing is kept.
  uint64_t content_id = 0;
  uint64_t content_version = 0;
  // The bytes are a parameter the caller binds again (a compiled graph's parameter, a Parameter
  // op by op): worth deriving from at their first use. Other bytes with an identity (any eager
  // tensor) may be met only once.
  bool parameter = false;
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  int64_t size() const { return num_elements(type.shape); }
};

// Everything a kernel receives. Threads come from the runtime's current arena (runtime/parallel.h).
struct KernelContext {
  std::span<const TensorView> inputs;
  std::span<const TensorView> outputs;
  const Attrs& attrs;
  std::string_view op_name;
  bool deterministic = false;  // fixed reduction order whatever the thread count
  // State the compiled graph built once for this node (runtime/prepared_kernels.h), e.g. constant
  // weights already in the layout the kernel's primitive wants; null when there is none (op by
  // op, or nothing to prepare). Only the op's own kernel knows its type.
  const void* prepared = nullptr;
};

using KernelFn = std::function<void(const KernelContext&)>;
using InferFn =
    std::function<std::vector<TensorType>(std::span<const TensorType> inputs, const Attrs& attrs)>;

// The math of an elementwise op over n contiguous elements, one per dtype (nullptr where the dtype
// is unsupported). inputs[k] points to n elements, or, when bit k of `scalars` is set, to one
// element standing for n copies of it (a constant, or a row's reduced value): no buffer of copies
// is written or read. The plain kernel and the fused-kernel evaluator both call these, so fused and
// unfused results agree bit for bit.
using TileFn = void (*)(const void* const* inputs, uint32_t scalars, void* output, int64_t n);
struct ElementwiseMath {
  std::array<TileFn, std::size(kAllDTypes)> by_dtype{};
  TileFn for_dtype(DType dtype) const { return by_dtype[static_cast<size_t>(dtype)]; }
};

// The math of a reduction over one contiguous row, per dtype: *out = reduce(row[0..n)), in an
// order fixed by n alone, so a reduction at the tail of a fused kernel sums as the plain kernel.
using RowReduceFn = void (*)(const void* row, int64_t n, void* out);
struct ReduceMath {
  std::array<RowReduceFn, std::size(kAllDTypes)> by_dtype{};
  // A whole-tensor reduction longer than this is reduced by the plain kernel in fixed blocks
  // combined in order; the evaluator does not fuse those (0: no limit).
  int64_t single_row_limit = 0;
  RowReduceFn for_dtype(DType dtype) const { return by_dtype[static_cast<size_t>(dtype)]; }
};

// A composite op's expansion into basic ops (graph-kernel fusion, opt_level >= 1): inserts nodes
// just before `node` in `graph` and returns the values that replace the node's outputs, or an empty
// vector to decline (the op then stays whole). With `bit_exact` the expander declines wherever its
// basic ops would not reproduce the op's own kernel bit for bit (the default expansion);
// without it (the op named by --enable_expand_ops) it expands whenever the shapes allow.
using ExpandFn = std::function<std::vector<Value>(Graph& graph, Node& node, bool bit_exact)>;

// The oracle for the conformance test: a plain, obviously correct computation in double precision.
struct RefTensor {
  Shape shape;
  std::vector<double> values;
};
using ReferenceFn =
    std::function<std::vector<RefTensor>(std::span<const RefTensor> inputs, const Attrs& attrs)>;

// One case the conformance test runs: input types and attributes.
struct OpSample {
  std::vector<TensorType> inputs;
  Attrs attrs;
  // Range the conformance test draws random inputs from (integers scaled to [5*low, 5*high]); ops
  // defined only on part of the line (log, sqrt, pow, batch_norm's variance) narrow it.
  double input_low = -2.0;
  double input_high = 2.0;
};

struct OpDef {
  std::string name;
  int min_inputs = 1;
  int max_inputs = 1;   // -1: variadic (concat)
  int num_outputs = 1;  // -1: decided by inference (split)
  std::vector<AttrSpec> attrs;
  Trait traits = Trait::kNone;
  InferFn infer;
  KernelFn kernel;
  std::optional<ElementwiseMath> elementwise;
  std::optional<ReduceMath> reduce;  // kReduce ops the fused-kernel evaluator can run as a tail
  ExpandFn expander;                 // kComposite ops: the expansion into basic ops
  ReferenceFn reference;
  std::vector<OpSample> samples;
  double tolerance = 1e-5;  // relative+absolute bound against the reference in float32
  // The backward rule (ir/grad_builder.h) and the forward values it reads. Empty: differentiating
  // through the op is an error naming it, unless it is kNoGradient or has no float output.
  BackwardFn backward;
  GradNeeds grad_needs;
  std::string doc;

  bool has(Trait t) const { return has_trait(traits, t); }
  // May output 0 be written over input `i`'s bytes (the input dying there, same size)? Elementwise
  // tile math reads element k of every input before writing element k; a kInPlace op allows it for
  // input 0. The memory planner and the eager dispatcher both ask this.
  bool may_write_over_input(size_t i) const {
    return (has(Trait::kElementwise) && elementwise.has_value()) ||
           (i == 0 && has(Trait::kInPlace));
  }
  // Checks arity and attributes (unknown, missing, wrong kind), fills defaults, then runs infer.
  // Errors name the op, the input types and the rule broken.
  std::vector<TensorType> infer_types(std::span<const TensorType> inputs, Attrs& attrs) const;
};

// Process-wide registry, filled by static OpRegistration objects in runtime/ops/*.cc.
const OpDef* find_op(std::string_view name);
const OpDef& get_op(std::string_view name);  // NotFound with the closest names when absent
std::vector<const OpDef*> all_ops();         // sorted by name

// Fluent declaration of an op; converting to OpRegistration registers it.
class OpRegistration;
class OpBuilder {
 public:
  explicit OpBuilder(std::string name) { def_.name = std::move(name); }
  OpBuilder& inputs(int min, int max) {
    def_.min_inputs = min, def_.max_inputs = max;
    return *this;
  }
  OpBuilder& arity(int n) { return inputs(n, n); }
  OpBuilder& outputs(int n) {
    def_.num_outputs = n;
    return *this;
  }
  OpBuilder& attr(std::string name, AttrKind kind,
                  std::optional<AttrValue> default_value = std::nullopt, std::string doc = {}) {
    def_.attrs.push_back({std::move(name), kind, std::move(default_value), std::move(doc)});
    return *this;
  }
  OpBuilder& traits(Trait t) {
    def_.traits = t;
    return *this;
  }
  OpBuilder& infer(InferFn fn) {
    def_.infer = std::move(fn);
    return *this;
  }
  OpBuilder& kernel(KernelFn fn) {
    def_.kernel = std::move(fn);
    return *this;
  }
  OpBuilder& elementwise(ElementwiseMath math) {
    def_.elementwise = math;
    return *this;
  }
  OpBuilder& reduce(ReduceMath math) {
    def_.reduce = math;
    return *this;
  }
  OpBuilder& expander(ExpandFn fn) {
    def_.expander = std::move(fn);
    return *this;
  }
  OpBuilder& reference(ReferenceFn fn) {
    def_.reference = std::move(fn);
    return *this;
  }
  OpBuilder& samples(std::vector<OpSample> s) {
    def_.samples = std::move(s);
    return *this;
  }
  OpBuilder& tolerance(double t) {
    def_.tolerance = t;
    return *this;
  }
  OpBuilder& backward(GradNeeds needs, BackwardFn fn) {
    def_.grad_needs = needs;
    def_.backward = std::move(fn);
    return *this;
  }
  OpBuilder& doc(std::string d) {
    def_.doc = std::move(d);
    return *this;
  }
  OpDef& def() { return def_; }

 private:
  friend class OpRegistration;
  OpDef def_;
};

class OpRegistration {
 public:
  OpRegistration(
      OpBuilder& builder);  // NOLINT: implicit so `const OpRegistration k = define_op(...)...;`
  OpRegistration(OpBuilder&& builder);  // NOLINT
  const OpDef& def() const { return *def_; }

 private:
  const OpDef* def_;
};

inline OpBuilder define_op(std::string name) {
  return OpBuilder(std::move(name));
}

}  // namespace mf::ir
