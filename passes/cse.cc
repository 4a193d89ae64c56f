// common-subexpression-elimination: computes each distinct pure expression once. Equal constants
// are merged first, so expressions over copies of one constant are recognised as the same.

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "ir/printer.h"
#include "passes/grad_transform.h"
#include "passes/passes.h"

namespace mf::passes {

namespace {

// Merges nodes with the same op, attributes and operands (in either order for commutative binary
// ops) into the first of them, and equal constants into the first. Promise: only pure,
// non-side-effect, non-control-flow nodes merge; attributes must be equal, defaults included.
class Cse final : public Pass {
 public:
  std::string_view name() const override { return "common-subexpression-elimination"; }

  bool run(ir::Graph& graph) override {
    bool changed = false;
    for_each_graph(graph, [&](ir::Graph& g) {
      changed |= merge_constants(g);
      changed |= merge_nodes(g);
    });
    return changed;
  }

 private:
  // Constants are compared by type first: only those sharing a type with another are hashed and
  // compared byte for byte, so a graph holding a model's weights (tens of MB, nearly every tensor
  // of its own shape) is not copied or hashed whole at every simplify round.
  static constexpr size_t kHashedPrefixBytes = 256;

  static bool merge_constants(ir::Graph& graph) {
    std::unordered_map<std::string, std::vector<ir::Constant*>> by_type;
    for (size_t i = 0; i < graph.num_constants(); ++i) {
      ir::Constant* c = graph.constant(i);
      by_type[ir::type_to_string(c->type())].push_back(c);
    }
    bool changed = false;
    for (auto& [type, constants] : by_type) {
      if (constants.size() < 2) continue;
      std::unordered_map<size_t, std::vector<ir::Constant*>> by_hash;
      for (ir::Constant* c : constants) {
        // Keyed by the first bytes only: weights that differ almost always differ there, and
        // those that agree are compared whole below (memcmp stops at the first difference).
        // Hashing every byte cost 16 ms per round on resnet18's 44.6 MiB of weights.
        const std::string_view head(reinterpret_cast<const char*>(c->bytes().data()),
                                    std::min<size_t>(c->bytes().size(), kHashedPrefixBytes));
        std::vector<ir::Constant*>& same_hash = by_hash[std::hash<std::string_view>{}(head)];
        ir::Constant* first = nullptr;
        for (ir::Constant* other : same_hash) {
          if (std::ranges::equal(other->bytes(), c->bytes())) first = other;
        }
        if (first == nullptr) {
          same_hash.push_back(c);
        } else if (!c->uses().empty()) {
          graph.replace_all_uses(c, first);
          changed = true;
        }
      }
    }
    return changed;
  }

  static bool merge_nodes(ir::Graph& graph) {
    bool changed = false;
    std::unordered_map<std::string, ir::Node*> seen;
    for (ir::Node* node : graph.topological_order()) {
      if (!mergeable(*node)) continue;
      auto [it, inserted] = seen.emplace(key_of(*node), node);
      if (inserted) continue;
      for (size_t k = 0; k < node->num_outputs(); ++k) {
        graph.replace_all_uses(node->output(k), it->second->output(k));
      }
      graph.erase_node(node);
      changed = true;
    }
    return changed;
  }

  // A recomputed copy repeats a forward node on purpose (passes/grad_transform.h).
  static bool mergeable(const ir::Node& node) {
    const ir::OpDef* def = node.def();
    return def != nullptr && def->has(ir::Trait::kPure) && !def->has(ir::Trait::kSideEffect) &&
           !def->has(ir::Trait::kControlFlow) && !is_recomputed(node);
  }

  static std::string operand_key(const ir::Value& v) {
    switch (v.kind()) {
      case ir::ValueKind::kParameter:
        return detail::str_cat("p", v.parameter()->index());
      case ir::ValueKind::kConstant:
        return detail::str_cat("c", v.constant()->index());
      case ir::ValueKind::kNode:
        return detail::str_cat("n", v.node()->id(), ".", v.index());
      case ir::ValueKind::kNone:
        break;
    }
    return "?";
  }

  static std::string key_of(const ir::Node& node) {
    std::vector<std::string> operands;
    for (const ir::Value& v : node.inputs()) operands.push_back(operand_key(v));
    if (node.def()->has(ir::Trait::kCommutative) && operands.size() == 2) {
      std::sort(operands.begin(), operands.end());
    }
    std::string key = node.op() + "(";
    for (const std::string& operand : operands) key += operand + ",";
    key += "){";
    for (const auto& [name, value] : node.attrs()) {
      key += name + ":" + ir::format_attr_value(value) + ",";
    }
    return key + "}";
  }
};

}  // namespace

std::unique_ptr<Pass> make_cse() {
  return std::make_unique<Cse>();
}

}  // namespace mf::passes
