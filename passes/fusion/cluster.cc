#include "passes/fusion/cluster.h"

#include <algorithm>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "passes/pass.h"
#include "runtime/fused_kernel.h"

namespace mf::passes::fusion {

namespace {

using ir::Trait;

// Constants up to this many elements are copied into a body (scalars mostly), so rewrites inside
// the body see them; bigger ones stay operands.
constexpr int64_t kInlineConstantElements = 64;

bool contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

int64_t bytes_of(const ir::TensorType& type) {
  return ir::num_elements(type.shape) * static_cast<int64_t>(ir::dtype_size(type.dtype));
}

// Elements per row of a reduction over trailing axes (size-1 axes may be either), or nullopt
// when it reduces a leading or middle axis, or one row longer than its kernel takes in one pass.
std::optional<int64_t> reduce_cols(const ir::Node& node) {
  const ir::Shape& shape = node.input(0).type().shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const std::vector<int64_t>& axes = ir::attr_ints(node.attrs(), "axes", node.op());
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[ir::normalize_axis(a, rank, node.op())] = true;
  int64_t start = rank;
  while (start > 0 && (reduced[start - 1] || shape[start - 1] == 1)) --start;
  for (int64_t d = 0; d < start; ++d) {
    if (reduced[d] && shape[d] != 1) return std::nullopt;
  }
  const int64_t cols = ir::num_elements(ir::Shape(shape.begin() + start, shape.end()));
  const int64_t n = ir::num_elements(shape);
  if (cols <= 1 || n == 0) return std::nullopt;
  const int64_t limit = node.def()->reduce->single_row_limit;
  if (n / cols == 1 && limit > 0 && cols > limit) return std::nullopt;
  return cols;
}

// The row length a value of shape `x` broadcast over `shape` implies: 0 when x holds one value,
// C when x holds one value per row of C trailing elements, nullopt when it is neither.
std::optional<int64_t> implied_cols(const ir::Shape& x, const ir::Shape& shape) {
  if (x.size() > shape.size()) return std::nullopt;
  if (ir::num_elements(x) == 1) return 0;
  const size_t lead = shape.size() - x.size();
  size_t k = 0;  // one past the last axis where x is not 1
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] != 1) k = lead + i + 1;
  }
  for (size_t d = 0; d < k; ++d) {
    const int64_t dim = d < lead ? 1 : x[d - lead];
    if (dim != shape[d]) return std::nullopt;
  }
  return ir::num_elements(ir::Shape(shape.begin() + k, shape.end()));
}

std::string unique_body_name(const ir::Graph& graph) {
  for (int i = 0;; ++i) {
    std::string name = "fused_" + std::to_string(i);
    if (graph.resolve_subgraph(name) == nullptr) return name;
  }
}

}  // namespace

std::string node_name(const ir::Node& node) {
  return node.op() + "#" + std::to_string(node.id());
}

void check_op_list(const std::vector<std::string>& names, std::string_view flag, bool expandable) {
  for (const std::string& name : names) {
    const ir::OpDef* def = ir::find_op(name);
    MF_CHECK(def != nullptr, InvalidArgument, flag, "=", name, " names no registered op");
    if (expandable) {
      if (def->expander) continue;
      std::string known;
      for (const ir::OpDef* op : ir::all_ops()) {
        if (op->expander) known += (known.empty() ? "" : ", ") + op->name;
      }
      MF_FAIL(InvalidArgument, flag, "=", name, ": op '", name,
              "' has no expander; ops with expanders: ", known);
    }
    const bool elementwise = def->has(Trait::kElementwise) && def->elementwise.has_value();
    const bool reduce = def->has(Trait::kReduce) && def->reduce.has_value();
    MF_CHECK((elementwise || reduce) && !def->has(Trait::kOpaque) && !def->has(Trait::kView),
             InvalidArgument, flag, "=", name, ": op '", name,
             "' can never join a fused kernel (only elementwise ops and reductions can)");
  }
}

std::string boundary_reason(const ir::Node& node, const FusionOptions& options) {
  const ir::OpDef* def = node.def();
  const std::string& op = node.op();
  if (def == nullptr) return "op '" + op + "' is not registered";
  if (def->has(Trait::kFused)) return "already a fused kernel";
  if (def->has(Trait::kControlFlow)) return "control flow ('" + op + "') is a boundary";
  if (def->has(Trait::kSideEffect)) return "'" + op + "' has side effects (a boundary)";
  if (def->has(Trait::kOpaque)) return "opaque op '" + op + "' is a boundary";
  if (def->has(Trait::kView)) return "view op '" + op + "' is a boundary";
  if (node.num_outputs() != 1) return "'" + op + "' has several outputs (a boundary)";
  const bool elementwise = def->has(Trait::kElementwise) && def->elementwise.has_value();
  const bool reduce = def->has(Trait::kReduce) && def->reduce.has_value();
  if (!elementwise && !reduce) {
    if (def->has(Trait::kComposite)) {
      return "composite op '" + op + "' was not expanded (a boundary)";
    }
    return "'" + op + "' is neither elementwise nor a reduction (a boundary)";
  }
  if (elementwise && node.num_inputs() > 0 &&
      def->elementwise->for_dtype(node.inputs().back().type().dtype) == nullptr) {
    return "'" + op + "' has no tile math for its dtype";
  }
  if (contains(options.disable_cluster_ops, op)) return "disabled by --disable_cluster_ops=" + op;
  if (!options.enable_cluster_ops_only.empty() && !contains(options.enable_cluster_ops_only, op)) {
    return "not in --enable_cluster_ops_only=" + joined(options.enable_cluster_ops_only);
  }
  return {};
}

std::vector<ir::Graph*> graphs_to_fuse(ir::Graph& root) {
  std::vector<ir::Graph*> out;
  std::vector<ir::Graph*> work{&root};
  while (!work.empty()) {
    ir::Graph* g = work.back();
    work.pop_back();
    out.push_back(g);
    std::unordered_set<const ir::Graph*> bodies;
    for (const ir::Node& node : g->nodes()) {
      if (!runtime::is_fused(node)) continue;
      const auto it = node.attrs().find("graph");
      if (it == node.attrs().end()) continue;
      if (const auto* name = std::get_if<std::string>(&it->second)) {
        bodies.insert(g->resolve_subgraph(*name));
      }
    }
    for (ir::Graph* sub : g->subgraphs()) {
      if (bodies.count(sub) == 0) work.push_back(sub);
    }
  }
  return out;
}

bool leaves_and_returns(const std::set<const ir::Node*>& members) {
  std::deque<const ir::Node*> work;
  std::unordered_set<const ir::Node*> seen;
  auto visit_users = [&](const ir::Node* n) {
    for (size_t k = 0; k < n->num_outputs(); ++k) {
      for (const ir::Use& use : n->uses(k)) {
        if (use.user != nullptr && members.count(use.user) == 0 && seen.insert(use.user).second) {
          work.push_back(use.user);
        }
      }
    }
  };
  for (const ir::Node* m : members) visit_users(m);
  while (!work.empty()) {
    const ir::Node* n = work.front();
    work.pop_front();
    for (size_t k = 0; k < n->num_outputs(); ++k) {
      for (const ir::Use& use : n->uses(k)) {
        if (use.user != nullptr && members.count(use.user) != 0) return true;
      }
    }
    visit_users(n);
  }
  return false;
}

ir::Node* fuse_nodes(ir::Graph& graph, const std::vector<ir::Node*>& members, std::string* why,
                     FusedKernelRecord* record) {
  const std::set<const ir::Node*> set(members.begin(), members.end());
  ir::Graph* body = graph.add_subgraph(unique_body_name(graph));
  std::vector<ir::Value> inputs;
  std::unordered_map<ir::Value, ir::Value, ir::ValueHash> map;
  auto map_input = [&](const ir::Value& v) -> ir::Value {
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    ir::Value mapped;
    if (v.kind() == ir::ValueKind::kConstant &&
        ir::num_elements(v.type().shape) <= kInlineConstantElements) {
      mapped = body->add_constant(v.type(), v.constant()->bytes());
    } else {
      mapped = body->add_parameter("x" + std::to_string(inputs.size()), v.type());
      inputs.push_back(v);
    }
    map.emplace(v, mapped);
    return mapped;
  };
  auto mapped = [&](const ir::Value& v) {
    auto it = map.find(v);
    return it != map.end() ? it->second : map_input(v);
  };
  std::vector<ir::Graph*> inlined_bodies;
  for (ir::Node* m : members) {
    if (runtime::is_fused(*m)) {
      // A fused member contributes its body's ops (parallel fusion of fused kernels).
      ir::Graph* sub = graph.resolve_subgraph(ir::attr_string(m->attrs(), "graph", m->op()));
      MF_CHECK(sub != nullptr, Internal, "fused node ", node_name(*m), " has no body");
      std::unordered_map<ir::Value, ir::Value, ir::ValueHash> local;
      for (size_t i = 0; i < sub->num_parameters(); ++i) {
        local.emplace(sub->parameter(i), mapped(m->input(i)));
      }
      for (size_t c = 0; c < sub->num_constants(); ++c) {
        local.emplace(sub->constant(c),
                      body->add_constant(sub->constant(c)->type(), sub->constant(c)->bytes()));
      }
      for (ir::Node* n : sub->topological_order()) {
        std::vector<ir::Value> in;
        for (const ir::Value& v : n->inputs()) in.push_back(local.at(v));
        ir::Node* copy = body->add_node(n->op(), std::move(in), n->attrs(), n->info());
        for (size_t k = 0; k < n->num_outputs(); ++k) local.emplace(n->output(k), copy->output(k));
      }
      for (size_t k = 0; k < m->num_outputs(); ++k) {
        map.emplace(m->output(k), local.at(sub->outputs()[k]));
      }
      inlined_bodies.push_back(sub);
      continue;
    }
    std::vector<ir::Value> in;
    for (const ir::Value& v : m->inputs()) in.push_back(mapped(v));
    ir::Node* copy = body->add_node(m->op(), std::move(in), m->attrs(), m->info());
    for (size_t k = 0; k < m->num_outputs(); ++k) map.emplace(m->output(k), copy->output(k));
  }
  // Outputs: member values read outside the cluster (or returned by the graph).
  std::vector<ir::Value> exported;
  int64_t saved = 0;
  for (ir::Node* m : members) {
    for (size_t k = 0; k < m->num_outputs(); ++k) {
      bool outside = false;
      int64_t inside = 0;
      for (const ir::Use& use : m->uses(k)) {
        if (use.user == nullptr || set.count(use.user) == 0) {
          outside = true;
        } else {
          ++inside;
        }
      }
      const int64_t bytes = bytes_of(m->output_type(k));
      saved += bytes * inside + (outside ? 0 : bytes);  // reads kept in cache, writes avoided
      if (outside) {
        exported.push_back(m->output(k));
        body->add_output(map.at(m->output(k)));
      }
    }
  }
  std::string reason = exported.empty() ? "nothing outside uses its results"
                                        : runtime::FusedKernel::unsupported(*body);
  if (!reason.empty()) {
    graph.erase_subgraph(body);
    if (why != nullptr) *why = reason;
    return nullptr;
  }
  std::vector<ir::TensorType> types;
  for (const ir::Value& v : exported) types.push_back(v.type());
  ir::Node* fused = graph.create_node(members.back(), "fused", inputs, {{"graph", body->name()}},
                                      types, members.back()->info());
  for (size_t k = 0; k < exported.size(); ++k)
    graph.replace_all_uses(exported[k], fused->output(k));
  for (auto it = members.rbegin(); it != members.rend(); ++it) graph.erase_node(*it);
  for (ir::Graph* sub : inlined_bodies) graph.erase_subgraph(sub);
  graph.sort_nodes();
  if (record != nullptr) {
    record->graph = graph.name();
    record->body = body->name();
    record->members.clear();
    for (const ir::Node& n : body->nodes()) record->members.push_back(node_name(n));
    record->bytes_saved = saved;
    record->kernel = runtime::FusedKernel(*body).describe();
  }
  return fused;
}

struct Clusterer::Cluster {
  std::set<const ir::Node*> members;
  std::map<const ir::Node*, int> depth;
  ir::Shape shape;              // the iteration shape
  std::optional<int64_t> cols;  // row length, once a reduction or per-row value fixes it
  bool has_reduce = false;
  bool stitched = false;
  int recomputed = 0;
};

void Clusterer::reject(const ir::Graph& graph, const ir::Node& candidate, const ir::Node& into,
                       std::string reason) {
  report_.rejected({graph.name(), node_name(candidate), "into the kernel of " + node_name(into),
                    std::move(reason)});
}

Clusterer::Added Clusterer::try_add(ir::Graph& graph, Cluster& c, ir::Node* consumer, ir::Node* p,
                                    bool last_chance) {
  std::string reason = boundary_reason(*p, options_);
  if (!reason.empty()) {
    reject(graph, *p, *consumer, reason);
    return Added::kNo;
  }
  if (static_cast<int>(c.members.size()) >= rules_.limit) {
    reject(graph, *p, *consumer, detail::str_cat("exceeds composite_op_limit_size ", rules_.limit));
    return Added::kNo;
  }
  const int depth = c.depth[consumer] + 1;
  if (c.has_reduce && rules_.reduce_fuse_depth && depth > *rules_.reduce_fuse_depth) {
    reject(graph, *p, *consumer,
           detail::str_cat("more than --reduce_fuse_depth=", *rules_.reduce_fuse_depth,
                           " ops above the reduce tail"));
    return Added::kNo;
  }
  const ir::Shape& out = p->output_type().shape;
  const bool is_reduce = p->def()->has(Trait::kReduce);
  std::optional<int64_t> new_cols = c.cols;
  if (is_reduce) {
    if (!rules_.stitch) {
      reject(
          graph, *p, *consumer,
          detail::str_cat("reduce not allowed as a producer at opt_level ", rules_.current_level));
      return Added::kNo;
    }
    const std::optional<int64_t> cols = reduce_cols(*p);
    const std::optional<int64_t> back = implied_cols(out, c.shape);
    if (!cols || p->input(0).type().shape != c.shape) {
      reject(graph, *p, *consumer,
             "does not reduce whole trailing rows of the kernel's shape " +
                 ir::shape_to_string(c.shape));
      return Added::kNo;
    }
    if ((c.cols && *c.cols != *cols) || !back || (*back != 0 && *back != *cols)) {
      reject(
          graph, *p, *consumer,
          "its result " + ir::shape_to_string(out) +
              " does not broadcast back over the kernel's rows (keep_dims=false, or other rows)");
      return Added::kNo;
    }
    new_cols = cols;
  } else if (out != c.shape) {
    const std::optional<int64_t> back = implied_cols(out, c.shape);
    if (!rules_.stitch || !back || *back == 0 || (c.cols && *c.cols != *back)) {
      reject(graph, *p, *consumer,
             "its shape " + ir::shape_to_string(out) + " differs from the kernel's " +
                 ir::shape_to_string(c.shape) + " (broadcast operands stay outside)");
      return Added::kNo;
    }
    new_cols = back;
  }
  // Uses outside the cluster: recompute, export (several outputs) or refuse.
  bool outside = false;
  for (size_t k = 0; k < p->num_outputs(); ++k) {
    for (const ir::Use& use : p->uses(k)) {
      outside = outside || use.user == nullptr || c.members.count(use.user) == 0;
    }
  }
  if (outside && !last_chance) return Added::kLater;
  if (outside) {
    int full_inputs = 0;
    for (const ir::Value& v : p->inputs()) full_inputs += v.type().shape == c.shape ? 1 : 0;
    if (rules_.recompute && !is_reduce && out == c.shape && full_inputs <= 1) {
      // Reading one input again costs no more than reading p's result; p itself is no longer
      // needed here, and disappears when its other readers fuse or recompute it too.
      ir::Node* copy = graph.insert_node(
          p, p->op(), std::vector<ir::Value>(p->inputs().begin(), p->inputs().end()), p->attrs(),
          p->info());
      const ir::UseList uses = p->uses(0);
      for (const ir::Use& use : uses) {
        if (use.user != nullptr && c.members.count(use.user) != 0) {
          graph.set_input(use.user, use.operand, copy->output());
        }
      }
      p = copy;
      ++c.recomputed;
    } else if (rules_.multi_output) {
      std::set<const ir::Node*> with = c.members;
      with.insert(p);
      if (leaves_and_returns(with)) {
        reject(graph, *p, *consumer,
               "its result is also used outside, on a path back into the kernel (a cycle)");
        return Added::kNo;
      }
    } else {
      reject(graph, *p, *consumer,
             detail::str_cat("its result is also used outside the kernel; several outputs need "
                             "opt_level 2 (now ",
                             rules_.current_level, ")"));
      return Added::kNo;
    }
  }
  if (is_reduce) c.has_reduce = c.stitched = true;
  c.cols = new_cols;
  c.members.insert(p);
  c.depth[p] = depth;
  return Added::kYes;
}

bool Clusterer::grow_and_fuse(ir::Graph& graph, ir::Node* seed) {
  Cluster c;
  c.members.insert(seed);
  c.depth[seed] = 0;
  if (seed->def()->has(Trait::kReduce)) {
    c.shape = seed->input(0).type().shape;
    c.cols = reduce_cols(*seed);
    c.has_reduce = true;
  } else {
    c.shape = seed->output_type().shape;
  }
  std::deque<ir::Node*> work{seed};
  std::vector<std::pair<ir::Node*, ir::Node*>> later;  // (consumer, producer) read outside too
  auto offer = [&](ir::Node* m, size_t i, bool last_chance) {
    ir::Node* p = m->input(i).node();
    if (p == nullptr || c.members.count(p) != 0) return false;
    switch (try_add(graph, c, m, p, last_chance)) {
      case Added::kYes:
        // A recomputed producer is a copy in p's place: take what the operand now names.
        work.push_back(m->input(i).node());
        return true;
      case Added::kLater:
        later.emplace_back(m, p);
        return false;
      case Added::kNo:
        return false;
    }
    return false;
  };
  auto retry = [&](bool last_chance) {
    bool progress = false;
    std::vector<std::pair<ir::Node*, ir::Node*>> pending;
    pending.swap(later);
    std::set<const ir::Node*> asked;
    for (auto [m, p] : pending) {
      if (c.members.count(p) != 0 || !asked.insert(p).second) continue;
      for (size_t i = 0; i < m->num_inputs(); ++i) {
        if (m->input(i).node() == p) {
          progress |= offer(m, i, last_chance);
          break;
        }
      }
    }
    return progress;
  };
  for (;;) {
    while (!work.empty()) {
      ir::Node* m = work.front();
      work.pop_front();
      for (size_t i = 0; i < m->num_inputs(); ++i) offer(m, i, false);
    }
    if (later.empty()) break;
    if (retry(false)) continue;
    if (!retry(true)) break;
  }
  const bool changed = c.recomputed > 0;
  if (c.members.size() < 2) return changed;
  if (rules_.require_stitch && !c.stitched) return changed;
  // Members in program order.
  std::vector<ir::Node*> members;
  for (ir::Node& n : graph.nodes()) {
    if (c.members.count(&n) != 0) members.push_back(&n);
  }
  FusedKernelRecord record;
  record.rule =
      rules_.rule + (c.has_reduce && !c.stitched ? " with a reduce tail" : "") +
      (c.recomputed > 0 ? detail::str_cat(", ", c.recomputed, " producer(s) recomputed") : "");
  record.level = rules_.level;
  std::string why;
  ir::Node* fused = fuse_nodes(graph, members, &why, &record);
  if (fused != nullptr) gone_.insert(members.begin(), members.end());
  if (fused == nullptr) {
    report_.rejected({graph.name(), node_name(*seed), "with its producers",
                      "the fused-kernel evaluator cannot run the cluster: " + why});
    return changed;
  }
  report_.fused(std::move(record));
  return true;
}

bool Clusterer::run(ir::Graph& graph) {
  bool changed = false;
  const std::vector<ir::Node*> order = graph.topological_order();
  gone_.clear();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    ir::Node* seed = *it;
    if (gone_.count(seed) != 0) continue;  // fused into an earlier kernel
    if (!boundary_reason(*seed, options_).empty()) continue;
    if (seed->def()->has(Trait::kReduce) && !reduce_cols(*seed)) {
      report_.rejected({graph.name(), node_name(*seed), "",
                        "reduces axes that are not trailing, or one row longer than its kernel "
                        "takes in one pass: its kernel runs alone"});
      continue;
    }
    changed |= grow_and_fuse(graph, seed);
  }
  return changed;
}

ClusterRules cluster_rules_from(const CompileOptions& options) {
  ClusterRules rules;
  rules.current_level = options.fusion_level;
  rules.multi_output = options.fusion_level >= 2;
  rules.recompute = options.fusion.recompute;
  rules.limit = options.fusion.composite_op_limit_size;
  rules.reduce_fuse_depth = options.fusion.reduce_fuse_depth;
  return rules;
}

bool fuse_each_graph(ir::Graph& root, std::string_view pass, const CompileOptions& options,
                     const std::function<bool(ir::Graph&, FusionReport&)>& fuse) {
  FusionReport report(std::string(pass), options);
  bool changed = false;
  for (ir::Graph* g : graphs_to_fuse(root)) changed |= fuse(*g, report);
  report.write();
  return changed;
}

bool run_clustering(ir::Graph& graph, std::string_view pass_name, const ClusterRules& rules,
                    const CompileOptions& options) {
  return fuse_each_graph(graph, pass_name, options, [&](ir::Graph& g, FusionReport& report) {
    Clusterer clusterer(rules, options.fusion, report);
    if (!clusterer.run(g)) return false;
    // Constants that only members read now live in the bodies: the graph (and its dump) drops
    // its copies.
    g.erase_unused_constants();
    return true;
  });
}

}  // namespace mf::passes::fusion
