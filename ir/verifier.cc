#include "ir/verifier.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "ir/call_graph.h"
#include "ir/printer.h"

namespace mf::ir {

namespace {

class Verifier {
 public:
  explicit Verifier(const Graph& graph) : graph_(graph) {}

  void run() {
    size_t i = 0;
    for (const Node& node : graph_.nodes()) position_[&node] = i++;
    for (size_t p = 0; p < graph_.num_parameters(); ++p) parameters_.insert(graph_.parameter(p));
    for (size_t c = 0; c < graph_.num_constants(); ++c) constants_.insert(graph_.constant(c));

    for (const Node& node : graph_.nodes()) check_operands(node);
    check_outputs();
    check_use_lists();
    check_order();
    for (const Node& node : graph_.nodes()) {
      check_types(node);
      check_subgraph_refs(node);
    }
    for (const Graph* sub : graph_.subgraphs()) {
      try {
        Verifier(*sub).run();
      } catch (Error& e) {
        e.add_context("in subgraph @" + sub->name());
        throw;
      }
    }
  }

 private:
  std::string where(const Node& node) const { return describe_node(graph_, node); }

  // A value is in this graph when its owner is one of ours; never dereference it otherwise.
  bool owned(const Value& v) const {
    switch (v.kind()) {
      case ValueKind::kParameter:
        return parameters_.count(v.parameter()) != 0;
      case ValueKind::kConstant:
        return constants_.count(v.constant()) != 0;
      case ValueKind::kNode:
        return position_.count(v.node()) != 0 && v.index() < v.node()->num_outputs();
      case ValueKind::kNone:
        return false;
    }
    return false;
  }

  void check_operands(const Node& node) {
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      MF_CHECK(owned(node.input(i)), Internal, where(node), ": operand ", i,
               " is not a value of graph @", graph_.name(), " (dangling use)");
    }
  }

  void check_outputs() {
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      MF_CHECK(owned(graph_.outputs()[i]), InvalidArgument, "graph @", graph_.name(), ": output ",
               i, " is not defined in the graph");
    }
  }

  // Every operand and graph output appears exactly once in its value's use list, and nothing else
  // does.
  void check_use_lists() {
    std::unordered_map<Value, std::vector<Use>, ValueHash> expected;
    for (const Node& node : graph_.nodes()) {
      for (size_t i = 0; i < node.num_inputs(); ++i) {
        expected[node.input(i)].push_back(Use{const_cast<Node*>(&node), i});
      }
    }
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      expected[graph_.outputs()[i]].push_back(Use{nullptr, i});
    }
    auto same = [&](const Value& v, const UseList& actual) {
      std::vector<Use> want = expected[v];
      std::vector<Use> have = actual;
      auto less = [](const Use& a, const Use& b) {
        return std::pair(a.user, a.operand) < std::pair(b.user, b.operand);
      };
      std::sort(want.begin(), want.end(), less);
      std::sort(have.begin(), have.end(), less);
      return want == have;
    };
    // Messages are built only on failure: describing a node costs a pass over the graph.
    constexpr const char* kOutOfSync =
        ": use list disagrees with the operands and outputs that use it";
    for (size_t p = 0; p < graph_.num_parameters(); ++p) {
      Parameter* param = graph_.parameter(p);
      MF_CHECK(same(Value(param), param->uses()), Internal, "parameter '", param->name(), "'",
               kOutOfSync);
    }
    for (size_t c = 0; c < graph_.num_constants(); ++c) {
      Constant* constant = graph_.constant(c);
      MF_CHECK(same(Value(constant), constant->uses()), Internal, "constant %const", c + 1,
               kOutOfSync);
    }
    for (const Node& node : graph_.nodes()) {
      for (size_t k = 0; k < node.num_outputs(); ++k) {
        MF_CHECK(same(Value(const_cast<Node*>(&node), k), node.uses(k)), Internal, where(node),
                 ": output ", k, kOutOfSync);
      }
    }
  }

  // Cycles first (a clearer message), then operands defined after their user.
  void check_order() {
    check_acyclic();
    for (const Node& node : graph_.nodes()) {
      for (size_t i = 0; i < node.num_inputs(); ++i) {
        const Node* def = node.input(i).node();
        if (def == nullptr) continue;
        MF_CHECK(position_.at(def) < position_.at(&node), Internal, where(node), ": operand ", i,
                 " is defined after its use");
      }
    }
  }

  // Kahn's algorithm; what it cannot schedule sits on or behind a cycle. Every such node has an
  // unscheduled operand, so walking operands from one must come back to a node already seen.
  void check_acyclic() {
    std::unordered_map<const Node*, size_t> pending;
    std::vector<const Node*> ready;
    for (const Node& node : graph_.nodes()) {
      size_t n = 0;
      for (const Value& v : node.inputs()) n += v.node() != nullptr ? 1 : 0;
      pending[&node] = n;
      if (n == 0) ready.push_back(&node);
    }
    size_t done = 0;
    while (!ready.empty()) {
      const Node* node = ready.back();
      ready.pop_back();
      ++done;
      for (size_t k = 0; k < node->num_outputs(); ++k) {
        for (const Use& use : node->uses(k)) {
          if (use.user != nullptr && --pending[use.user] == 0) ready.push_back(use.user);
        }
      }
    }
    if (done == graph_.num_nodes()) return;
    const Node* walk = nullptr;
    for (const Node& node : graph_.nodes()) {
      if (pending[&node] != 0) {
        walk = &node;
        break;
      }
    }
    std::unordered_set<const Node*> seen;
    while (walk != nullptr && seen.insert(walk).second) {
      const Node* next = nullptr;
      for (const Value& v : walk->inputs()) {
        if (v.node() != nullptr && pending[v.node()] != 0) next = v.node();
      }
      walk = next;
    }
    MF_FAIL(Internal, walk == nullptr ? std::string("graph @") + graph_.name() : where(*walk),
            ": is on a dependency cycle");
  }

  void check_types(const Node& node) {
    MF_CHECK(node.def() != nullptr, InvalidArgument, where(node), ": op '", node.op(),
             "' is not registered");
    std::vector<TensorType> inputs;
    for (const Value& v : node.inputs()) inputs.push_back(v.type());
    Attrs attrs = node.attrs();
    std::vector<TensorType> inferred;
    try {
      if (node.def()->has(Trait::kControlFlow)) {
        // Output types come from the subgraphs: keep the arity and attribute checks of
        // infer_types, take the stored types, then compare them with the subgraphs.
        OpDef def = *node.def();
        def.infer = [&node](std::span<const TensorType>, const Attrs&) {
          return std::vector<TensorType>(node.output_types().begin(), node.output_types().end());
        };
        inferred = def.infer_types(inputs, attrs);
        check_control_flow(node, inputs);
      } else {
        inferred = node.def()->infer_types(inputs, attrs);
      }
    } catch (Error& e) {
      e.add_context("at " + where(node));
      throw;
    }
    // Inference only adds defaults: the node is complete when no key was added. Keys, not values:
    // a NaN attribute never equals itself.
    MF_CHECK(attrs.size() == node.attrs().size(), InvalidArgument, where(node),
             ": attributes are incomplete (defaults not filled in)");
    MF_CHECK(inferred.size() == node.num_outputs(), InvalidArgument, where(node), ": has ",
             node.num_outputs(), " outputs but inference gives ", inferred.size());
    for (size_t k = 0; k < inferred.size(); ++k) {
      MF_CHECK(inferred[k] == node.output_type(k), InvalidArgument, where(node), ": output ", k,
               " is stored as ", type_to_string(node.output_type(k)), " but inference gives ",
               type_to_string(inferred[k]));
    }
  }

  // The subgraphs a control-flow node names exist and agree with its operand and output types.
  void check_control_flow(const Node& node, const std::vector<TensorType>& inputs) const {
    const std::vector<TensorType> outputs(node.output_types().begin(), node.output_types().end());
    auto subgraph = [&](const char* attr) -> const Graph& {
      const std::string& name = attr_string(node.attrs(), attr, node.op());
      const Graph* sub = graph_.resolve_subgraph(name);
      MF_CHECK(sub != nullptr, InvalidArgument, where(node), ": attribute '", attr,
               "' names subgraph @", echo(name, 80), ", which does not exist");
      return *sub;
    };
    auto params = [](const Graph& g) {
      std::vector<TensorType> types;
      for (size_t i = 0; i < g.num_parameters(); ++i) types.push_back(g.parameter(i)->type());
      return types;
    };
    auto results = [](const Graph& g) {
      std::vector<TensorType> types;
      for (const Value& v : g.outputs()) types.push_back(v.type());
      return types;
    };
    auto expect_same = [&](const std::vector<TensorType>& have, const std::vector<TensorType>& want,
                           const Graph& sub, std::string_view what, std::string_view node_side) {
      MF_CHECK(have == want, InvalidArgument, where(node), ": subgraph @", sub.name(), "'s ", what,
               " ", types_text(have), " do not match the node's ", node_side, " ",
               types_text(want));
    };
    if (node.op() == "call" || node.def()->has(Trait::kFused)) {
      // A fused node runs its body like a call runs its callee.
      const Graph& g = subgraph("graph");
      expect_same(params(g), inputs, g, "parameter types", "input types");
      expect_same(results(g), outputs, g, "output types", "output types");
    } else if (node.op() == "cond") {
      MF_CHECK(num_elements(inputs[0].shape) == 1, InvalidArgument, where(node),
               ": the predicate (input 0) must be a scalar, got ", type_to_string(inputs[0]));
      const std::vector<TensorType> args(inputs.begin() + 1, inputs.end());
      for (const char* attr : {"then_branch", "else_branch"}) {
        const Graph& g = subgraph(attr);
        expect_same(params(g), args, g, "parameter types", "input types after the predicate");
        expect_same(results(g), outputs, g, "output types", "output types");
      }
    } else if (node.op() == "while") {
      const Graph& c = subgraph("cond_graph");
      expect_same(params(c), inputs, c, "parameter types", "loop variable types");
      const std::vector<TensorType> pred = results(c);
      MF_CHECK(pred.size() == 1 && num_elements(pred[0].shape) == 1, InvalidArgument, where(node),
               ": subgraph @", c.name(), " must return one scalar predicate, returns ",
               types_text(pred));
      const Graph& b = subgraph("body_graph");
      expect_same(params(b), inputs, b, "parameter types", "loop variable types");
      expect_same(results(b), inputs, b, "output types", "loop variable types");
      MF_CHECK(outputs == inputs, InvalidArgument, where(node), ": output types ",
               types_text(outputs), " must be the loop variable types ", types_text(inputs));
    } else {
      MF_FAIL(InvalidArgument, where(node), ": unknown control-flow op '", node.op(), "'");
    }
  }

  static std::string types_text(const std::vector<TensorType>& types) {
    std::string out = "(";
    for (size_t i = 0; i < types.size(); ++i) out += (i > 0 ? ", " : "") + type_to_string(types[i]);
    return out + ")";
  }

  void check_subgraph_refs(const Node& node) {
    for (const auto& [name, value] : node.attrs()) {
      if (!names_subgraph(name)) continue;
      const auto* target = std::get_if<std::string>(&value);
      if (target == nullptr) continue;
      MF_CHECK(graph_.resolve_subgraph(*target) != nullptr, InvalidArgument, where(node),
               ": attribute '", echo(name, 80), "' names subgraph @", echo(*target, 80),
               ", which does not exist");
    }
  }

  const Graph& graph_;
  std::unordered_map<const Node*, size_t> position_;
  std::unordered_set<const Parameter*> parameters_;
  std::unordered_set<const Constant*> constants_;
};

}  // namespace

void verify(const Graph& graph) {
  Verifier(graph).run();
}

}  // namespace mf::ir
