#include "passes/plan_memory.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "ir/printer.h"
#include "runtime/memory_pool.h"

namespace mf::passes {
namespace {

using runtime::Plan;
using runtime::Slot;
using runtime::SlotKind;
using runtime::Step;

constexpr int kNoStep = -1;  // a parameter's or constant's "producer": defined before step 0

// A run of slots sharing the same bytes (an in-place chain): one arena allocation whose lifetime
// spans every member's.
struct Group {
  std::vector<int> slots;
  size_t bytes = 0;
  int start = 0;  // first step that writes it
  int end = 0;    // last step that reads it
  size_t offset = 0;
};

// Plans one graph; subgraphs go through the same planner, memoised by graph so a subgraph named by
// several nodes is planned once, and a recursive reference (a subgraph that reaches itself through
// nested control flow) points back at the plan being built without owning it.
class Planner {
 public:
  explicit Planner(const CompileOptions& options) : options_(options) {}

  void build(Plan& plan, const ir::Graph& graph) {
    building_[&graph] = &plan;
    plan.graph = &graph;
    add_slots(plan, graph);
    order_steps(plan, graph);
    compute_lifetimes(plan);
    if (options_.memory_level == MemoryLevel::kO1) {
      assign_arena(plan);
    } else {
      assign_pooled(plan);
    }
    add_dependencies(plan);
    compute_peak(plan);
    building_.erase(&graph);
  }

 private:
  std::shared_ptr<const Plan> subplan(const ir::Graph& graph, const ir::Node& node,
                                      const std::string& name) {
    const ir::Graph* sub = graph.resolve_subgraph(name);
    MF_CHECK(sub != nullptr, NotFound, ir::describe_node(graph, node), ": names subgraph @", name,
             ", which does not exist in graph @", graph.name());
    if (auto it = building_.find(sub); it != building_.end()) {
      // Recursion: the plan is owned further up this chain of subplans, which outlives the edge.
      return std::shared_ptr<const Plan>(std::shared_ptr<const Plan>(), it->second);
    }
    if (auto it = done_.find(sub); it != done_.end()) return it->second;
    auto plan = std::make_shared<Plan>();
    // The parent is half built: keep its per-graph state aside while the subgraph uses the members.
    auto slot_of = std::move(slot_of_);
    auto producer = std::move(producer_);
    auto last_use = std::move(last_use_);
    auto readers = std::move(readers_);
    try {
      build(*plan, *sub);
    } catch (Error& e) {
      e.add_context("while planning subgraph @" + sub->name());
      throw;
    }
    slot_of_ = std::move(slot_of);
    producer_ = std::move(producer);
    last_use_ = std::move(last_use);
    readers_ = std::move(readers);
    done_[sub] = plan;
    return plan;
  }

  int new_slot(Plan& plan, const ir::TensorType& type, SlotKind kind, size_t index = 0) {
    Slot slot;
    slot.type = type;
    slot.kind = kind;
    slot.index = index;
    slot.bytes = slot_bytes(type);
    plan.slots.push_back(slot);
    return static_cast<int>(plan.slots.size()) - 1;
  }

  void add_slots(Plan& plan, const ir::Graph& graph) {
    slot_of_ = {};  // not clear(): that zeroes the largest graph's buckets again for every subgraph
    for (size_t p = 0; p < graph.num_parameters(); ++p) {
      ir::Parameter* param = graph.parameter(p);
      const int id = new_slot(plan, param->type(), SlotKind::kParameter, p);
      plan.parameters.push_back(id);
      slot_of_[ir::Value(param)] = id;
    }
    for (size_t c = 0; c < graph.num_constants(); ++c) {
      ir::Constant* constant = graph.constant(c);
      slot_of_[ir::Value(constant)] = new_slot(plan, constant->type(), SlotKind::kConstant, c);
    }
  }

  void order_steps(Plan& plan, const ir::Graph& graph) {
    for (ir::Node* node : graph.topological_order()) {
      MF_CHECK(node->def() != nullptr, NotFound, ir::describe_node(graph, *node), ": op '",
               node->op(), "' is not registered; it cannot be planned");
      Step step;
      step.node = node;
      for (const ir::Value& v : node->inputs()) step.inputs.push_back(slot_of_.at(v));
      for (size_t k = 0; k < node->num_outputs(); ++k) {
        const int id = new_slot(plan, node->output_type(k), SlotKind::kPooled);
        slot_of_[ir::Value(node, k)] = id;
        step.outputs.push_back(id);
      }
      // A fused kernel's body is evaluated by the kernel itself, in tiles: it needs no plan of its
      // own.
      if (node->def()->has(ir::Trait::kControlFlow) && !node->def()->has(ir::Trait::kFused)) {
        for (const std::string& name : subgraph_names(*node)) {
          step.subplans.push_back(subplan(graph, *node, name));
        }
      }
      plan.steps.push_back(std::move(step));
    }
    for (const ir::Value& v : graph.outputs()) {
      const int id = slot_of_.at(v);
      plan.outputs.push_back(id);
      if (v.kind() == ir::ValueKind::kNode) plan.slots[id].is_output = true;
    }
  }

  // Lifetime of each slot in step indices: the producer (kNoStep for parameters and constants) and
  // the last reader (the producer itself when nothing reads it); readers per slot for the hazards.
  void compute_lifetimes(const Plan& plan) {
    const size_t n = plan.slots.size();
    producer_.assign(n, kNoStep);
    last_use_.assign(n, kNoStep);
    readers_.assign(n, {});
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const Step& step = plan.steps[s];
      for (int o : step.outputs) producer_[o] = last_use_[o] = static_cast<int>(s);
      for (int i : step.inputs) {
        last_use_[i] = static_cast<int>(s);
        if (readers_[i].empty() || readers_[i].back() != static_cast<int>(s)) {
          readers_[i].push_back(static_cast<int>(s));
        }
      }
    }
  }

  bool is_intermediate(const Plan& plan, int slot) const {
    const Slot& s = plan.slots[slot];
    return s.kind != SlotKind::kParameter && s.kind != SlotKind::kConstant && !s.is_output;
  }

  // Memory O0 (SOMAS off, MindSpore's meaning): every tensor has its own pooled buffer, which goes
  // back to the pool as soon as its last reader has run (a value nothing reads goes back right
  // after its producer), so the pool's peak is the live set and later steps reuse the freed
  // blocks. Graph outputs are never released: the caller keeps them. KernelExecutor's inter-op
  // parallel run frees by counting readers instead (the planned step assumes serial order).
  //
  // An elementwise step whose input 0 dies there writes its output over that input's buffer, as op
  // by op does (engine/eager/dispatch.h): without it a compiled O0 run wrote every activation into
  // a fresh buffer where PYNATIVE wrote in place, and was slower than PYNATIVE.
  void assign_pooled(Plan& plan) {
    if (plan.steps.empty()) return;
    for (size_t id = 0; id < plan.slots.size(); ++id) {
      if (!is_intermediate(plan, static_cast<int>(id)) || producer_[id] == kNoStep) continue;
      plan.steps[last_use_[id]].release_after.push_back(static_cast<int>(id));
    }
    // (sys.mem_Reuse governs the arena's reuse at memory O1; like op by op, this does not ask it.)
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      Step& step = plan.steps[s];
      step.in_place = can_share(plan, step, static_cast<int>(s)) &&
                      plan.slots[step.inputs[0]].kind == SlotKind::kPooled &&
                      plan.slots[step.outputs[0]].kind == SlotKind::kPooled;
    }
  }

  // May output 0 of `step` take input 0's bytes? Elementwise math (and ops marked kInPlace) reads
  // element i before writing element i (Eigen coefficient-wise assignment), and a view's kernel is
  // a no-op when the buffers coincide; either way input 0 must die here, be ours to overwrite and
  // have the same size.
  bool can_share(const Plan& plan, const Step& step, int s) const {
    const ir::OpDef& def = *step.node->def();
    if (!def.has(ir::Trait::kView) && !def.may_write_over_input(0)) return false;
    if (step.inputs.empty() || step.outputs.size() != 1) return false;
    const int in = step.inputs[0];
    const int out = step.outputs[0];
    if (!is_intermediate(plan, in) || !is_intermediate(plan, out)) return false;
    if (last_use_[in] != s) return false;
    const Slot& a = plan.slots[in];
    const Slot& b = plan.slots[out];
    return a.bytes == b.bytes && a.type.dtype == b.type.dtype;
  }

  // Memory O1: in-place groups, then greedy best-fit by size over lifetime intervals (SOMAS-like):
  // the biggest group goes first, each into the smallest gap left by the groups whose lifetimes
  // overlap its own. Without reuse every group gets bytes of its own.
  void assign_arena(Plan& plan) {
    std::vector<int> group_of(plan.slots.size(), -1);
    std::vector<Group> groups;
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      Step& step = plan.steps[s];
      for (size_t k = 0; k < step.outputs.size(); ++k) {
        const int out = step.outputs[k];
        if (!is_intermediate(plan, out)) continue;
        plan.slots[out].kind = SlotKind::kArena;
        if (k == 0 && options_.memory_reuse && can_share(plan, step, static_cast<int>(s))) {
          step.in_place = true;
          Group& g = groups[group_of[step.inputs[0]]];
          g.slots.push_back(out);
          g.end = std::max(g.end, last_use_[out]);
          group_of[out] = group_of[step.inputs[0]];
          continue;
        }
        group_of[out] = static_cast<int>(groups.size());
        groups.push_back(Group{{out}, plan.slots[out].bytes, static_cast<int>(s), last_use_[out]});
      }
    }

    if (!options_.memory_reuse) {
      size_t arena = 0;
      for (Group& g : groups) {
        g.offset = arena;
        arena += g.bytes;
      }
      apply(plan, groups, arena);
      return;
    }
    // Several placement orders (SOMAS tries heuristics and keeps the best): the one with the lowest
    // planned peak wins, then the smallest arena, then the earlier order.
    using Less = bool (*)(const Group&, const Group&);
    const Less orders[] = {
        [](const Group& a, const Group& b) {
          return a.bytes != b.bytes ? a.bytes > b.bytes : a.start < b.start;
        },
        [](const Group& a, const Group& b) {
          return a.start != b.start ? a.start < b.start : a.bytes > b.bytes;
        },
        [](const Group& a, const Group& b) {
          const int la = a.end - a.start;
          const int lb = b.end - b.start;
          return la != lb ? la > lb : a.bytes > b.bytes;
        },
        [](const Group& a, const Group& b) {
          const size_t wa = a.bytes * size_t(a.end - a.start + 1);
          const size_t wb = b.bytes * size_t(b.end - b.start + 1);
          return wa != wb ? wa > wb : a.start < b.start;
        },
    };
    std::vector<Group> best;
    size_t best_arena = 0;
    size_t best_peak = SIZE_MAX;
    for (Less less : orders) {
      std::vector<Group> candidate = groups;
      const size_t arena = place(candidate, less);
      apply(plan, candidate, arena);
      compute_peak(plan);
      if (plan.planned_peak_bytes < best_peak ||
          (plan.planned_peak_bytes == best_peak && arena < best_arena)) {
        best = std::move(candidate);
        best_arena = arena;
        best_peak = plan.planned_peak_bytes;
      }
    }
    apply(plan, best, best_arena);
  }

  static void apply(Plan& plan, const std::vector<Group>& groups, size_t arena) {
    for (const Group& g : groups) {
      for (int id : g.slots) plan.slots[id].offset = g.offset;
    }
    plan.arena_bytes = arena;
  }

  // Greedy best-fit in the given order: each group goes into the smallest gap left by the groups
  // already placed whose lifetimes overlap its own, else on top of them. Returns the arena size.
  static size_t place(std::vector<Group>& groups, bool (*less)(const Group&, const Group&)) {
    std::vector<size_t> order(groups.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return less(groups[a], groups[b]); });
    std::vector<size_t> placed;
    size_t arena = 0;
    for (size_t gi : order) {
      Group& g = groups[gi];
      std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping lifetimes
      for (size_t pi : placed) {
        const Group& p = groups[pi];
        if (p.start <= g.end && g.start <= p.end) busy.emplace_back(p.offset, p.offset + p.bytes);
      }
      std::sort(busy.begin(), busy.end());
      size_t best = SIZE_MAX;
      size_t best_gap = SIZE_MAX;
      size_t cursor = 0;
      for (const auto& [begin, end] : busy) {
        if (begin > cursor && begin - cursor >= g.bytes && begin - cursor < best_gap) {
          best = cursor;
          best_gap = begin - cursor;
        }
        cursor = std::max(cursor, end);
      }
      g.offset = best != SIZE_MAX ? best : cursor;
      arena = std::max(arena, g.offset + g.bytes);
      placed.push_back(gi);
    }
    return arena;
  }

  // Data edges, program order among side-effect and control-flow steps, and for arena reuse the
  // write-after-read edges: a step that writes bytes some earlier slot used waits for that slot's
  // producer and every reader, so steps run at once never race on shared memory.
  void add_dependencies(Plan& plan) {
    int last_effect = kNoStep;
    std::vector<int> arena_slots;
    for (size_t id = 0; id < plan.slots.size(); ++id) {
      if (plan.slots[id].kind == SlotKind::kArena) arena_slots.push_back(static_cast<int>(id));
    }
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      Step& step = plan.steps[s];
      const int si = static_cast<int>(s);
      std::set<int> deps;
      for (int i : step.inputs) {
        if (producer_[i] != kNoStep) deps.insert(producer_[i]);
      }
      const ir::OpDef& def = *step.node->def();
      const bool ordered = def.has(ir::Trait::kSideEffect) ||
                           (def.has(ir::Trait::kControlFlow) && !def.has(ir::Trait::kFused));
      if (ordered) {
        if (last_effect != kNoStep) deps.insert(last_effect);
        last_effect = si;
      }
      for (int out : step.outputs) {
        const Slot& o = plan.slots[out];
        if (o.kind != SlotKind::kArena || o.bytes == 0) continue;
        for (int w : arena_slots) {
          const Slot& ws = plan.slots[w];
          if (w == out || producer_[w] >= si || last_use_[w] > si || ws.bytes == 0) continue;
          if (ws.offset >= o.offset + o.bytes || o.offset >= ws.offset + ws.bytes) continue;
          deps.insert(producer_[w]);
          for (int r : readers_[w]) {
            if (r != si) deps.insert(r);
          }
        }
      }
      deps.erase(si);
      step.depends_on.assign(deps.begin(), deps.end());
    }
  }

  // The most bytes alive at once. At each step: the arena up to the end of its highest range in
  // use then (the arena's layout, so fragmentation counts), plus the pooled slots alive then. Graph
  // outputs stay alive to the end; parameters and constants are the caller's and the graph's.
  void compute_peak(Plan& plan) {
    const size_t n = plan.steps.size();
    std::vector<int64_t> delta(n + 1, 0);
    std::vector<size_t> arena_top(n, 0);
    for (size_t id = 0; id < plan.slots.size(); ++id) {
      const Slot& slot = plan.slots[id];
      if (producer_[id] == kNoStep) continue;
      if (slot.kind == SlotKind::kArena) {
        for (int s = producer_[id]; s <= last_use_[id]; ++s) {
          arena_top[s] = std::max(arena_top[s], slot.offset + slot.bytes);
        }
        continue;
      }
      if (slot.kind != SlotKind::kPooled) continue;
      // Pooled intermediates live until their last reader has run (their release step), graph
      // outputs to the end.
      const int end = slot.is_output ? static_cast<int>(n) - 1 : last_use_[id];
      delta[producer_[id]] += static_cast<int64_t>(slot.bytes);
      delta[end + 1] -= static_cast<int64_t>(slot.bytes);
    }
    int64_t live = 0;
    size_t peak = 0;
    for (size_t s = 0; s < n; ++s) {
      live += delta[s];
      peak = std::max(peak, arena_top[s] + static_cast<size_t>(live) + nested_peak(plan.steps[s]));
    }
    plan.planned_peak_bytes = peak;
  }

  // What a control-flow step's subplans add while it runs: one branch or callee at a time; a while
  // loop's condition runs while the body's results are alive, so both count. A recursive subplan
  // still being built counts as 0 (its depth is only known at run time).
  static size_t nested_peak(const Step& step) {
    size_t sum = 0;
    size_t most = 0;
    for (const auto& sub : step.subplans) {
      sum += sub->planned_peak_bytes;
      most = std::max(most, sub->planned_peak_bytes);
    }
    return step.node->op() == "while" ? sum : most;
  }

  const CompileOptions& options_;
  std::unordered_map<const ir::Graph*, Plan*> building_;
  std::unordered_map<const ir::Graph*, std::shared_ptr<const Plan>> done_;
  // Per graph being built (reset by build(); subgraphs are planned before their parent needs
  // these).
  std::unordered_map<ir::Value, int, ir::ValueHash> slot_of_;
  std::vector<int> producer_;
  std::vector<int> last_use_;
  std::vector<std::vector<int>> readers_;
};

}  // namespace

size_t slot_bytes(const ir::TensorType& type) {
  const size_t raw = static_cast<size_t>(ir::num_elements(type.shape)) * ir::dtype_size(type.dtype);
  return (raw + runtime::kTensorAlignment - 1) / runtime::kTensorAlignment *
         runtime::kTensorAlignment;
}

std::vector<std::string> subgraph_names(const ir::Node& node) {
  std::vector<std::string> names;
  for (const ir::AttrSpec& spec : node.def()->attrs) {
    if (spec.kind != ir::AttrKind::kString) continue;
    names.push_back(ir::attr_string(node.attrs(), spec.name, node.op()));
  }
  return names;
}

runtime::Plan plan_memory(const ir::Graph& graph, const CompileOptions& options) {
  Planner planner(options);
  Plan plan;
  planner.build(plan, graph);
  return plan;
}

}  // namespace mf::passes
