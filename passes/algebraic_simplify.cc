// algebraic-simplification: a table of small rewrite rules that read like algebra (x * 1 -> x).
// Rules name ops because algebra is about specific ops; each rule is exact (bit for bit, NaN and
// signed zero included) and never changes a node's output type, so broadcasting is respected.

#include <cmath>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "passes/passes.h"

namespace mf::passes {

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

// Which zero a rule accepts. In IEEE arithmetic x + (+0) turns -0 into +0 and x - (-0) does the
// same, so for floats only x + (-0) and x - (+0) are identities; integers have one zero.
enum class Zero { kPositive, kNegative };

// True when v is a constant whose every element equals `value` (for floats, zeros also match the
// sign `zero` asks for).
bool is_filled(const Value& v, double value, Zero zero = Zero::kPositive) {
  if (v.kind() != ir::ValueKind::kConstant) return false;
  const ir::Constant& c = *v.constant();
  return ir::visit_dtype(c.type().dtype, [&](auto t) {
    using T = decltype(t);
    for (T element : c.data<T>()) {
      if (static_cast<double>(element) != value) return false;
      if constexpr (std::is_floating_point_v<T>) {
        if (value == 0 && std::signbit(element) != (zero == Zero::kNegative)) return false;
      }
    }
    return true;
  });
}

// Uses of the node's output 0 move to `replacement`, only when that keeps the type: x * ones(4, 3)
// with x of shape (3) must stay, as its result is bigger than x.
bool forward(Graph& graph, Node& node, const Value& replacement) {
  if (node.num_outputs() != 1 || replacement.type() != node.output_type()) return false;
  graph.replace_all_uses(node.output(), replacement);
  return true;
}

// The producer of operand i when it is a node running `op`, else null.
Node* producer(const Node& node, size_t i, std::string_view op) {
  Node* p = node.input(i).node();
  return p != nullptr && p->op() == op && node.input(i).index() == 0 ? p : nullptr;
}

std::vector<int64_t> resolved_perm(const Node& transpose) {
  const size_t rank = transpose.input(0).type().shape.size();
  std::vector<int64_t> perm = ir::attr_ints(transpose.attrs(), "perm", "transpose");
  if (perm.empty()) {
    for (size_t d = rank; d-- > 0;) perm.push_back(int64_t(d));
  }
  for (int64_t& p : perm) {
    if (p < 0) p += int64_t(rank);
  }
  return perm;
}

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != int64_t(i)) return false;
  }
  return true;
}

// x op c -> x when c is the identity element on the right (and, for commutative ops, the left).
bool right_identity(Graph& g, Node& n, double value, Zero zero = Zero::kPositive) {
  return is_filled(n.input(1), value, zero) && forward(g, n, n.input(0));
}
bool left_identity(Graph& g, Node& n, double value, Zero zero = Zero::kPositive) {
  return is_filled(n.input(0), value, zero) && forward(g, n, n.input(1));
}

bool mul_one(Graph& g, Node& n) {
  return right_identity(g, n, 1) || left_identity(g, n, 1);
}
bool div_one(Graph& g, Node& n) {
  return right_identity(g, n, 1);
}

bool add_zero(Graph& g, Node& n) {
  const Zero zero = ir::is_floating(n.output_type().dtype) ? Zero::kNegative : Zero::kPositive;
  return right_identity(g, n, 0, zero) || left_identity(g, n, 0, zero);
}
bool sub_zero(Graph& g, Node& n) {
  return right_identity(g, n, 0, Zero::kPositive);
}

// x - x -> 0 only for integers: for floats inf - inf and NaN - NaN are NaN, not 0.
bool sub_self(Graph& g, Node& n) {
  const ir::TensorType& type = n.output_type();
  if (n.input(0) != n.input(1) || ir::is_floating(type.dtype) ||
      ir::num_elements(type.shape) > kMaxFoldedElements) {
    return false;
  }
  std::vector<uint8_t> zeros(size_t(ir::num_elements(type.shape)) * ir::dtype_size(type.dtype));
  return forward(g, n, g.add_constant(type, std::move(zeros)));
}

bool double_negation(Graph& g, Node& n) {
  Node* inner = producer(n, 0, "neg");
  return inner != nullptr && forward(g, n, inner->input(0));
}

bool reshape_of_reshape(Graph& g, Node& n) {
  Node* inner = producer(n, 0, "reshape");
  if (inner == nullptr) return false;
  g.set_input(&n, 0, inner->input(0));  // same element count, so the outer shape still applies
  return true;
}

bool reshape_to_same_shape(Graph& g, Node& n) {
  return forward(g, n, n.input(0));
}

bool transpose_identity(Graph& g, Node& n) {
  return is_identity(resolved_perm(n)) && forward(g, n, n.input(0));
}

// transpose(transpose(x, p), q): output axis j is x's axis p[q[j]].
bool transpose_of_transpose(Graph& g, Node& n) {
  Node* inner = producer(n, 0, "transpose");
  if (inner == nullptr) return false;
  const std::vector<int64_t> p = resolved_perm(*inner), q = resolved_perm(n);
  std::vector<int64_t> composed;
  for (int64_t axis : q) composed.push_back(p[size_t(axis)]);
  if (is_identity(composed)) return forward(g, n, inner->input(0));
  g.set_input(&n, 0, inner->input(0));
  n.set_attr("perm", composed);
  return true;
}

bool cast_to_same_dtype(Graph& g, Node& n) {
  return forward(g, n, n.input(0));
}

// One rule: the op it applies to and a rewrite that returns true iff it changed the graph.
struct Rule {
  std::string_view name;
  std::string_view op;
  bool (*apply)(Graph& graph, Node& node);
};

// The rules, tried in order on every node; the first that fires wins for that visit.
constexpr Rule kRules[] = {
    {"mul-by-one", "mul", mul_one},               // x * 1, 1 * x -> x
    {"add-zero", "add", add_zero},                // x + 0, 0 + x -> x (floats: only -0)
    {"sub-zero", "sub", sub_zero},                // x - 0 -> x (floats: only +0)
    {"sub-self", "sub", sub_self},                // x - x -> 0 (integers only)
    {"div-by-one", "div", div_one},               // x / 1 -> x
    {"double-negation", "neg", double_negation},  // -(-x) -> x
    {"reshape-of-reshape", "reshape", reshape_of_reshape},
    {"reshape-to-same-shape", "reshape", reshape_to_same_shape},
    {"transpose-identity", "transpose", transpose_identity},
    {"transpose-of-transpose", "transpose", transpose_of_transpose},
    {"cast-to-same-dtype", "cast", cast_to_same_dtype},
};

// Applies kRules in one sweep over every node (the simplify group repeats it).
// Promise: every rewrite is exact and keeps each node's output types; replaced nodes are left for
// dead-code-elimination.
class AlgebraicSimplification final : public Pass {
 public:
  std::string_view name() const override { return "algebraic-simplification"; }

  bool run(ir::Graph& graph) override {
    bool changed = false;
    for_each_graph(graph, [&](ir::Graph& g) {
      for (ir::Node* node : g.topological_order()) {
        for (const Rule& rule : kRules) {
          if (node->op() == rule.op && node->has_uses() && rule.apply(g, *node)) {
            changed = true;
            break;
          }
        }
      }
    });
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_algebraic_simplification() {
  return std::make_unique<AlgebraicSimplification>();
}

}  // namespace mf::passes
