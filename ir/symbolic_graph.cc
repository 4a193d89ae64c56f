#include "ir/symbolic_graph.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <unordered_map>

#include "base/error.h"
#include "ir/printer.h"

namespace mf::ir {
namespace {

// The graph a path of subgraph names leads to from `top`.
Graph* follow(Graph& top, const std::vector<std::string>& path) {
  Graph* graph = &top;
  for (const std::string& name : path) {
    graph = graph->find_subgraph(name);
    MF_CHECK(graph != nullptr, Internal, "symbolic graph: no subgraph @", name);
  }
  return graph;
}

// The subgraph names a node runs (call and fused: "graph"; cond and while: their branches).
std::vector<std::string> subgraph_attrs(const Node& node) {
  std::vector<std::string> names;
  for (const char* attr : {"graph", "then_branch", "else_branch", "cond_graph", "body_graph"}) {
    if (auto it = node.attrs().find(attr); it != node.attrs().end()) {
      if (const auto* name = std::get_if<std::string>(&it->second)) names.push_back(*name);
    }
  }
  return names;
}

bool same_value(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kParameter:
      return a.parameter()->index() == b.parameter()->index();
    case ValueKind::kConstant:
      return a.constant()->index() == b.constant()->index();
    case ValueKind::kNode:
      return a.node()->id() == b.node()->id() && a.index() == b.index();
    case ValueKind::kNone:
      return true;
  }
  return false;
}

class Generalizer {
 public:
  Generalizer(const SymbolValues& first, const SymbolValues& probe)
      : first_(first), probe_(probe) {}

  // Compares two graphs at one path; false with why_ set where they differ beyond sizes.
  bool compare(const Graph& a, const Graph& p, const std::vector<std::string>& path,
               const std::vector<size_t>& top_inputs) {
    if (a.num_parameters() != p.num_parameters()) return fail("the parameters differ");
    for (size_t i = 0; i < a.num_parameters(); ++i) {
      const Parameter &pa = *a.parameter(i), &pp = *p.parameter(i);
      if (pa.name() != pp.name() || pa.is_weight() != pp.is_weight() ||
          pa.type().dtype != pp.type().dtype) {
        return fail("parameter " + pa.name() + " differs");
      }
      // Inputs are bound per call and subgraph parameters re-inferred from their operands; a
      // weight keeps its shape.
      const bool bound = !path.empty() || std::count(top_inputs.begin(), top_inputs.end(), i);
      if (!bound && pa.type() != pp.type()) return fail("weight " + pa.name() + " changes shape");
    }
    if (a.num_constants() != p.num_constants()) {
      return fail("a constant depends on the input sizes");
    }
    for (size_t i = 0; i < a.num_constants(); ++i) {
      const Constant &ca = *a.constant(i), &cp = *p.constant(i);
      if (ca.type() != cp.type() || !std::ranges::equal(ca.bytes(), cp.bytes())) {
        return fail("a constant of type " + type_to_string(ca.type()) +
                    " depends on the input sizes");
      }
    }
    if (a.num_nodes() != p.num_nodes()) return fail("the ops chosen depend on the input sizes");
    auto ia = a.nodes().begin();
    auto ip = p.nodes().begin();
    for (; ia != a.nodes().end(); ++ia, ++ip) {
      const Node &na = *ia, &np = *ip;
      if (na.op() != np.op() || na.id() != np.id() || na.num_inputs() != np.num_inputs() ||
          na.num_outputs() != np.num_outputs()) {
        return fail("the ops chosen depend on the input sizes (" + describe_node(a, na) + ")");
      }
      const std::string op = na.op();
      if (op == "cond" || op == "while") {
        return fail("control flow (" + describe_node(a, na) + ") is compiled per size");
      }
      for (size_t k = 0; k < na.num_inputs(); ++k) {
        if (!same_value(na.input(k), np.input(k))) {
          return fail("the dataflow depends on the input sizes (" + describe_node(a, na) + ")");
        }
      }
      if (!compare_attrs(a, na, np, path)) return false;
      for (const std::string& name : subgraph_attrs(na)) {
        if (++callers_[a.resolve_subgraph(name)] > 1) {
          return fail("subgraph @" + name + " is run by several nodes");
        }
      }
    }
    if (a.outputs().size() != p.outputs().size()) return fail("the outputs differ");
    for (size_t k = 0; k < a.outputs().size(); ++k) {
      if (!same_value(a.outputs()[k], p.outputs()[k])) return fail("the outputs differ");
    }
    const std::vector<Graph*> subs_a = a.subgraphs(), subs_p = p.subgraphs();
    if (subs_a.size() != subs_p.size()) return fail("the subgraphs differ");
    for (size_t k = 0; k < subs_a.size(); ++k) {
      if (subs_a[k]->name() != subs_p[k]->name()) return fail("the subgraphs differ");
      std::vector<std::string> sub_path = path;
      sub_path.push_back(subs_a[k]->name());
      if (!compare(*subs_a[k], *subs_p[k], sub_path, {})) return false;
    }
    return true;
  }

  std::vector<SizePatch> patches;
  std::string why;

 private:
  bool fail(std::string reason) {
    why = std::move(reason);
    return false;
  }

  bool compare_attrs(const Graph& a, const Node& na, const Node& np,
                     const std::vector<std::string>& path) {
    const std::string where = describe_node(a, na);
    if (na.attrs().size() != np.attrs().size())
      return fail("the attributes of " + where + " differ");
    for (auto it = na.attrs().begin(), jt = np.attrs().begin(); it != na.attrs().end();
         ++it, ++jt) {
      if (it->first != jt->first) return fail("the attributes of " + where + " differ");
      if (it->second == jt->second) continue;
      const auto* ints_a = std::get_if<std::vector<int64_t>>(&it->second);
      const auto* ints_p = std::get_if<std::vector<int64_t>>(&jt->second);
      const auto* int_a = std::get_if<int64_t>(&it->second);
      const auto* int_p = std::get_if<int64_t>(&jt->second);
      if (int_a && int_p) {
        if (!patch(path, na, it->first, -1, *int_a, *int_p)) return false;
        continue;
      }
      if (!ints_a || !ints_p || ints_a->size() != ints_p->size()) {
        return fail("attribute '" + it->first + "' of " + where + " depends on the input sizes");
      }
      for (size_t k = 0; k < ints_a->size(); ++k) {
        if ((*ints_a)[k] == (*ints_p)[k]) continue;
        if (!patch(path, na, it->first, int64_t(k), (*ints_a)[k], (*ints_p)[k])) return false;
      }
    }
    return true;
  }

  bool patch(const std::vector<std::string>& path, const Node& node, const std::string& attr,
             int64_t index, int64_t first, int64_t probe) {
    std::optional<SizeExpr> size = find_size_expr(first, probe, first_, probe_);
    if (!size) {
      return fail("attribute '" + attr + "' of op '" + node.op() +
                  "' holds a size that is no product of the input symbols");
    }
    patches.push_back({path, node.id(), attr, index, std::move(*size)});
    return true;
  }

  const SymbolValues &first_, &probe_;
  std::unordered_map<const Graph*, int> callers_;
};

// Re-infers every node of `graph` in order; call and fused bodies take their operands' types
// first.
void reinfer_all(Graph& graph) {
  for (Node* node : graph.topological_order()) {
    MF_CHECK(node->def() != nullptr, NotFound, describe_node(graph, *node), ": op '", node->op(),
             "' is not registered");
    if (!node->def()->has(Trait::kControlFlow)) {
      try {
        graph.reinfer(node);
      } catch (Error& e) {
        e.add_context("at " + describe_node(graph, *node));
        throw;
      }
      continue;
    }
    const std::vector<std::string> names = subgraph_attrs(*node);
    MF_CHECK(names.size() == 1 && (node->op() == "call" || node->op() == "fused"), Internal,
             describe_node(graph, *node), ": control flow in a symbolic graph");
    Graph* body = graph.resolve_subgraph(names[0]);
    MF_CHECK(body != nullptr && body->num_parameters() == node->num_inputs(), Internal,
             describe_node(graph, *node), ": its body does not take its operands");
    for (size_t i = 0; i < node->num_inputs(); ++i) {
      body->set_parameter_type(body->parameter(i), node->input(i).type());
    }
    reinfer_all(*body);
    std::vector<TensorType> types;
    for (const Value& out : body->outputs()) types.push_back(out.type());
    graph.set_output_types(node, std::move(types));
  }
}

}  // namespace

std::string first_type_difference(const Graph& a, const Graph& b) {
  if (a.num_nodes() != b.num_nodes() || a.subgraphs().size() != b.subgraphs().size()) {
    return "@" + a.name() + " has " + std::to_string(a.num_nodes()) + " nodes where @" + b.name() +
           " has " + std::to_string(b.num_nodes());
  }
  for (size_t i = 0; i < a.num_parameters() && i < b.num_parameters(); ++i) {
    if (a.parameter(i)->type() != b.parameter(i)->type()) {
      return "parameter " + a.parameter(i)->name() + " differs";
    }
  }
  auto ib = b.nodes().begin();
  for (const Node& na : a.nodes()) {
    const Node& nb = *ib++;
    if (na.op() != nb.op() || !std::ranges::equal(na.output_types(), nb.output_types())) {
      return describe_node(a, na) + " infers " + type_to_string(na.output_type()) + " where " +
             type_to_string(nb.output_type()) + " was compiled";
    }
  }
  const std::vector<Graph*> subs_a = a.subgraphs(), subs_b = b.subgraphs();
  for (size_t k = 0; k < subs_a.size(); ++k) {
    std::string difference = first_type_difference(*subs_a[k], *subs_b[k]);
    if (!difference.empty()) return difference;
  }
  return {};
}

namespace {

// The printed first graph with each number that differs from the probe's print written as its
// expression ("?" when none fits). The two prints have one structure: only sizes differ.
std::string merge_prints(const std::string& first, const std::string& probe,
                         const SymbolValues& first_values, const SymbolValues& probe_values) {
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  std::string out;
  size_t i = 0, j = 0;
  while (i < first.size() && j < probe.size()) {
    const bool starts_number =
        is_digit(first[i]) &&
        (i == 0 || (!std::isalnum(static_cast<unsigned char>(first[i - 1])) &&
                    first[i - 1] != '_' && first[i - 1] != '.' && first[i - 1] != '%'));
    if (!starts_number || !is_digit(probe[j])) {
      if (first[i] != probe[j]) return first;  // not one structure: the sizes stay concrete
      out += first[i++];
      ++j;
      continue;
    }
    size_t ie = i, je = j;
    while (ie < first.size() && is_digit(first[ie])) ++ie;
    while (je < probe.size() && is_digit(probe[je])) ++je;
    const std::string a = first.substr(i, ie - i), b = probe.substr(j, je - j);
    if (a == b || a.size() > 18 || b.size() > 18) {
      out += a;
    } else {
      const std::optional<SizeExpr> size =
          find_size_expr(std::stoll(a), std::stoll(b), first_values, probe_values);
      out += size ? size->to_string() : "?";
    }
    i = ie;
    j = je;
  }
  return out;
}

bool is_prime(int64_t n) {
  for (int64_t d = 2; d * d <= n; ++d) {
    if (n % d == 0) return false;
  }
  return n >= 2;
}

}  // namespace

std::optional<SizeExpr> find_size_expr(int64_t first, int64_t probe,
                                       const SymbolValues& first_values,
                                       const SymbolValues& probe_values) {
  std::vector<std::string> symbols;
  for (const auto& [name, value] : first_values) symbols.push_back(name);
  const size_t n = symbols.size();
  for (uint64_t mask = 1; n < 20 && mask < (uint64_t{1} << n); ++mask) {
    int64_t prod_first = 1, prod_probe = 1;
    std::vector<std::string> used;
    bool fits = true;
    for (size_t s = 0; s < n && fits; ++s) {
      if (!(mask >> s & 1)) continue;
      used.push_back(symbols[s]);
      const auto pf = checked_mul(prod_first, first_values.at(symbols[s]));
      const auto pp = checked_mul(prod_probe, probe_values.at(symbols[s]));
      fits = pf && pp && *pf != 0 && *pp != 0;
      if (fits) prod_first = *pf, prod_probe = *pp;
    }
    if (!fits || first % prod_first != 0 || probe % prod_probe != 0) continue;
    if (first / prod_first != probe / prod_probe) continue;
    return SizeExpr{first / prod_first, std::move(used)};
  }
  return std::nullopt;
}

int64_t SizeExpr::evaluate(const SymbolValues& values) const {
  int64_t value = factor;
  for (const std::string& symbol : symbols) {
    const auto it = values.find(symbol);
    MF_CHECK(it != values.end(), Internal, "size ", to_string(), ": '", symbol, "' is unbound");
    const auto product = checked_mul(value, it->second);
    MF_CHECK(product.has_value(), InvalidArgument, "size ", to_string(), " overflows at ", symbol,
             " = ", it->second);
    value = *product;
  }
  return value;
}

std::string SizeExpr::to_string() const {
  std::string out = factor == 1 && !symbols.empty() ? "" : std::to_string(factor);
  for (const std::string& symbol : symbols) {
    out += (out.empty() ? "" : " * ") + (symbol.starts_with('?') ? std::string("?") : symbol);
  }
  return out;
}

std::string SymbolicGraph::describe() const {
  std::string out = "dynamic inputs: " + signature_to_string(inputs) + "\n";
  for (const SizePatch& p : patches) {
    std::string where;
    for (const std::string& g : p.graph_path) where += "@" + g + "/";
    out += "  size " + where + "node " + std::to_string(p.node_id) + " " + p.attr +
           (p.index >= 0 ? "[" + std::to_string(p.index) + "]" : "") + " = " + p.size.to_string() +
           "\n";
  }
  return out;
}

SymbolValues probe_values(const std::vector<InputSignature>& inputs, const SymbolValues& avoid) {
  std::vector<int64_t> taken;
  for (const auto& [name, value] : avoid) taken.push_back(value);
  for (const InputSignature& input : inputs) {
    for (const SymbolicDim& dim : input.shape) {
      if (dim.known()) taken.push_back(dim.size);
    }
  }
  SymbolValues probe;
  int64_t candidate = 53;
  for (const InputSignature& input : inputs) {
    for (const SymbolicDim& dim : input.shape) {
      if (dim.known() || probe.count(dim.symbol)) continue;
      while (!is_prime(candidate) || std::count(taken.begin(), taken.end(), candidate)) {
        ++candidate;
      }
      probe[dim.symbol] = candidate++;
    }
  }
  return probe;
}

std::vector<InputSignature> name_every_dimension(std::vector<InputSignature> inputs) {
  int unnamed = 0;
  for (InputSignature& input : inputs) {
    for (SymbolicDim& dim : input.shape) {
      if (!dim.known() && dim.symbol.empty()) dim.symbol = "?" + std::to_string(++unnamed);
    }
  }
  return inputs;
}

ProbePlan plan_probe(const std::vector<InputSignature>& declared,
                     const std::vector<Shape>& first_shapes) {
  ProbePlan plan;
  plan.inputs = name_every_dimension(declared);
  MF_CHECK(first_shapes.size() == plan.inputs.size(), Internal, "plan_probe: ", first_shapes.size(),
           " shapes for ", plan.inputs.size(), " inputs");
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    bind_input(plan.inputs[i], plan.inputs[i].dtype, first_shapes[i], plan.first);
  }
  // The same probe for every first binding when none collides with it (so a compile cache can key
  // by the probe's graph); otherwise one that avoids the first sizes.
  plan.probe = probe_values(plan.inputs, {});
  for (const auto& [symbol, value] : plan.probe) {
    if (plan.first.at(symbol) == value) {
      plan.probe = probe_values(plan.inputs, plan.first);
      break;
    }
  }
  for (const InputSignature& input : plan.inputs) {
    plan.probe_shapes.push_back(concrete_shape(input, plan.probe));
  }
  return plan;
}

std::variant<SymbolicGraph, std::string> generalize(std::unique_ptr<Graph> first,
                                                    const SymbolValues& first_values,
                                                    const Graph& probe,
                                                    const SymbolValues& probe_values,
                                                    std::vector<InputSignature> inputs,
                                                    std::vector<size_t> input_parameters) {
  Generalizer generalizer(first_values, probe_values);
  if (!generalizer.compare(*first, probe, {}, input_parameters)) return generalizer.why;
  SymbolicGraph symbolic{std::move(first), std::move(inputs), std::move(input_parameters),
                         std::move(generalizer.patches)};
  // Soundness: bound to the probe's sizes, the graph must infer exactly what the probe compiled.
  std::vector<Shape> probe_shapes;
  for (size_t i = 0; i < symbolic.inputs.size(); ++i) {
    probe_shapes.push_back(probe.parameter(symbolic.input_parameters[i])->type().shape);
  }
  std::unique_ptr<Graph> rebound;
  try {
    rebound = specialize(symbolic, probe_shapes);
  } catch (const Error& e) {
    return "re-inferring at the probe sizes failed: " + e.message();
  }
  std::string difference = first_type_difference(*rebound, probe);
  if (!difference.empty()) return "re-inferring at the probe sizes differs: " + difference;
  symbolic.text = "# " + symbolic.describe();
  for (size_t pos = 0; (pos = symbolic.text.find('\n', pos)) + 1 < symbolic.text.size(); ++pos) {
    symbolic.text.insert(pos + 1, "# ");
  }
  symbolic.text +=
      merge_prints(print_graph(*symbolic.graph), print_graph(probe), first_values, probe_values);
  return symbolic;
}

std::unique_ptr<Graph> specialize(const SymbolicGraph& symbolic, const std::vector<Shape>& shapes) {
  MF_CHECK(shapes.size() == symbolic.inputs.size(), Internal, "specialize: ", shapes.size(),
           " shapes for ", symbolic.inputs.size(), " inputs");
  SymbolValues values;
  for (size_t i = 0; i < shapes.size(); ++i) {
    bind_input(symbolic.inputs[i], symbolic.inputs[i].dtype, shapes[i], values);
  }
  std::unique_ptr<Graph> graph = symbolic.graph->clone();
  for (size_t i = 0; i < shapes.size(); ++i) {
    Parameter* p = graph->parameter(symbolic.input_parameters[i]);
    graph->set_parameter_type(p, {p->type().dtype, shapes[i]});
  }
  for (const SizePatch& patch : symbolic.patches) {
    Graph* owner = follow(*graph, patch.graph_path);
    Node* node = nullptr;
    for (Node& n : owner->nodes()) {
      if (n.id() == patch.node_id) node = &n;
    }
    MF_CHECK(node != nullptr, Internal, "symbolic graph: no node ", patch.node_id);
    const int64_t size = patch.size.evaluate(values);
    if (patch.index < 0) {
      node->set_attr(patch.attr, size);
    } else {
      auto ints = std::get<std::vector<int64_t>>(node->attrs().at(patch.attr));
      ints.at(size_t(patch.index)) = size;
      node->set_attr(patch.attr, std::move(ints));
    }
  }
  reinfer_all(*graph);
  return graph;
}

}  // namespace mf::ir
