#include "passes/plan_check.h"

#include <algorithm>
#include <unordered_set>

#include "base/error.h"
#include "ir/printer.h"
#include "passes/plan_memory.h"

namespace mf::passes {
namespace {

using runtime::Plan;
using runtime::Slot;
using runtime::SlotKind;
using runtime::Step;

constexpr int kBefore = -1;  // the "producer" of a parameter or constant: it exists before step 0

class PlanChecker {
 public:
  // `root` and every plan reachable through subplans, each once (a subplan may be named by several
  // steps, or by itself through nested control flow).
  void check_all(const Plan& root) {
    pending_.push_back(&root);
    while (!pending_.empty()) {
      const Plan* next = pending_.back();
      pending_.pop_back();
      if (checked_.insert(next).second) check(*next);
    }
  }

 private:
  void check(const Plan& plan) {
    MF_CHECK(plan.graph != nullptr, DataLoss, "the plan names no graph");
    try {
      check_structure(plan);
      check_memory(plan);
      check_ordering(plan);
    } catch (Error& e) {
      e.add_context("in the plan of graph @" + plan.graph->name());
      throw;
    }
  }

  int slot_id(const Plan& plan, int id, const char* what) const {
    MF_CHECK(id >= 0 && static_cast<size_t>(id) < plan.slots.size(), DataLoss, what, " slot ", id,
             " is out of range (", plan.slots.size(), " slots)");
    return id;
  }

  void check_structure(const Plan& plan) {
    const ir::Graph& graph = *plan.graph;
    const size_t n = plan.slots.size();
    producer_.assign(n, kBefore);
    last_use_.assign(n, kBefore);
    readers_.assign(n, {});
    defined_.assign(n, false);
    for (size_t id = 0; id < n; ++id) {
      const Slot& slot = plan.slots[id];
      MF_CHECK(slot.bytes >= slot_bytes(slot.type), DataLoss, "slot ", id, " holds ", slot.bytes,
               " bytes, its type ", ir::type_to_string(slot.type), " needs ",
               slot_bytes(slot.type));
    }
    MF_CHECK(plan.parameters.size() == graph.num_parameters(), DataLoss, "the plan has ",
             plan.parameters.size(), " parameter slots, the graph ", graph.num_parameters(),
             " parameters");
    for (size_t p = 0; p < plan.parameters.size(); ++p) {
      const Slot& slot = plan.slots[slot_id(plan, plan.parameters[p], "parameter")];
      MF_CHECK(slot.kind == SlotKind::kParameter && slot.index == p &&
                   slot.type == graph.parameter(p)->type(),
               DataLoss, "the slot of parameter ", p, " is not that parameter");
      defined_[plan.parameters[p]] = true;
    }
    constant_slot_.assign(graph.num_constants(), -1);
    for (size_t id = 0; id < n; ++id) {
      const Slot& slot = plan.slots[id];
      if (slot.kind != SlotKind::kConstant) continue;
      MF_CHECK(slot.index < graph.num_constants() && constant_slot_[slot.index] < 0 &&
                   slot.type == graph.constant(slot.index)->type(),
               DataLoss, "slot ", id, " is not a constant of the graph, or a second slot of one");
      constant_slot_[slot.index] = static_cast<int>(id);
      defined_[id] = true;
    }

    // Node -> step, sorted by address for lookup.
    step_of_.clear();
    step_of_.reserve(plan.steps.size());
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      MF_CHECK(plan.steps[s].node != nullptr, DataLoss, "step ", s, " has no node");
      step_of_.emplace_back(plan.steps[s].node, static_cast<int>(s));
    }
    std::sort(step_of_.begin(), step_of_.end());
    for (size_t i = 1; i < step_of_.size(); ++i) {
      MF_CHECK(step_of_[i].first != step_of_[i - 1].first, DataLoss, "node ",
               ir::describe_node(graph, *step_of_[i].first), " is two steps");
    }
    MF_CHECK(plan.steps.size() == graph.num_nodes(), DataLoss, "the plan has ", plan.steps.size(),
             " steps, the graph ", graph.num_nodes(), " nodes");
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const Step& step = plan.steps[s];
      const ir::Node& node = *step.node;
      const int si = static_cast<int>(s);
      MF_CHECK(node.def() != nullptr, DataLoss, "step ", s, ": op '", node.op(),
               "' is not registered");
      MF_CHECK(step.inputs.size() == node.num_inputs(), DataLoss, "step ", s, " reads ",
               step.inputs.size(), " slots, its node ", node.num_inputs(), " inputs");
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        const int id = slot_id(plan, step.inputs[i], "input");
        MF_CHECK(id == slot_of(plan, node.input(i)), DataLoss, "step ", s, " reads slot ", id,
                 " as input ", i, ", which is not the slot of that value");
        MF_CHECK(defined_[id], DataLoss, "step ", s, " reads slot ", id, " before it is written");
        last_use_[id] = si;
        if (readers_[id].empty() || readers_[id].back() != si) readers_[id].push_back(si);
      }
      MF_CHECK(step.outputs.size() == node.num_outputs(), DataLoss, "step ", s, " writes ",
               step.outputs.size(), " slots, its node has ", node.num_outputs(), " outputs");
      for (size_t k = 0; k < step.outputs.size(); ++k) {
        const int id = slot_id(plan, step.outputs[k], "output");
        const Slot& slot = plan.slots[id];
        MF_CHECK(!defined_[id] && (slot.kind == SlotKind::kPooled || slot.kind == SlotKind::kArena),
                 DataLoss, "step ", s, " writes slot ", id,
                 ", which is not a fresh intermediate slot");
        MF_CHECK(slot.type == node.output_type(k), DataLoss, "step ", s, " output ", k, " is ",
                 ir::type_to_string(node.output_type(k)), ", its slot ",
                 ir::type_to_string(slot.type));
        defined_[id] = true;
        producer_[id] = last_use_[id] = si;
      }
      check_subplans(plan, step, s);
    }
    MF_CHECK(plan.outputs.size() == graph.outputs().size(), DataLoss, "the plan has ",
             plan.outputs.size(), " outputs, the graph ", graph.outputs().size());
    for (size_t k = 0; k < plan.outputs.size(); ++k) {
      const int id = slot_id(plan, plan.outputs[k], "graph output");
      MF_CHECK(id == slot_of(plan, graph.outputs()[k]), DataLoss, "graph output ", k,
               " is not in slot ", id);
      const bool from_node = graph.outputs()[k].kind() == ir::ValueKind::kNode;
      MF_CHECK(!from_node || plan.slots[id].is_output, DataLoss, "graph output ", k, " (slot ", id,
               ") is not marked as an output");
    }
    for (size_t id = 0; id < n; ++id) {
      MF_CHECK(defined_[id], DataLoss, "slot ", id, " is never written");
    }
  }

  int slot_of(const Plan& plan, const ir::Value& v) const {
    switch (v.kind()) {
      case ir::ValueKind::kParameter:
        return plan.parameters.at(v.parameter()->index());
      case ir::ValueKind::kConstant:
        return constant_slot_.at(v.constant()->index());
      case ir::ValueKind::kNode: {
        auto it = std::lower_bound(step_of_.begin(), step_of_.end(),
                                   std::pair<const ir::Node*, int>(v.node(), -1));
        if (it == step_of_.end() || it->first != v.node()) return -1;
        const Step& producer = plan.steps[it->second];
        return v.index() < producer.outputs.size() ? producer.outputs[v.index()] : -1;
      }
      case ir::ValueKind::kNone:
        break;
    }
    return -1;
  }

  void check_subplans(const Plan& plan, const Step& step, size_t s) {
    const ir::Node& node = *step.node;
    const ir::OpDef& def = *node.def();
    if (!def.has(ir::Trait::kControlFlow) || def.has(ir::Trait::kFused)) {
      MF_CHECK(step.subplans.empty(), DataLoss, "step ", s, " (", node.op(),
               ") has subplans but is not control flow");
      return;
    }
    const std::vector<std::string> names = subgraph_names(node);
    MF_CHECK(step.subplans.size() == names.size(), DataLoss, "step ", s, " (", node.op(), ") has ",
             step.subplans.size(), " subplans for ", names.size(), " subgraphs");
    for (size_t i = 0; i < names.size(); ++i) {
      const Plan* sub = step.subplans[i].get();
      MF_CHECK(sub != nullptr && sub->graph != nullptr &&
                   sub->graph == plan.graph->resolve_subgraph(names[i]),
               DataLoss, "step ", s, " (", node.op(), "): subplan ", i,
               " is not the plan of subgraph @", names[i]);
      pending_.push_back(sub);
    }
  }

  void check_memory(const Plan& plan) {
    arena_.clear();
    for (size_t id = 0; id < plan.slots.size(); ++id) {
      const Slot& slot = plan.slots[id];
      if (slot.kind != SlotKind::kArena) continue;
      MF_CHECK(
          slot.offset + slot.bytes <= plan.arena_bytes && slot.offset + slot.bytes >= slot.offset,
          DataLoss, "arena slot ", id, " [", slot.offset, ", ", slot.offset + slot.bytes,
          ") lies outside the arena of ", plan.arena_bytes, " bytes");
      MF_CHECK(!slot.is_output, DataLoss, "graph output slot ", id, " lives in the arena");
      if (slot.bytes > 0) arena_.push_back(static_cast<int>(id));
    }
    // Byte ranges that meet belong to slots never alive at once: one's last use comes before the
    // other's producer, or exactly at it when that step runs in place from one to the other.
    for (size_t i = 0; i < arena_.size(); ++i) {
      for (size_t j = i + 1; j < arena_.size(); ++j) {
        int a = arena_[i], b = arena_[j];
        if (!bytes_meet(plan.slots[a], plan.slots[b])) continue;
        if (producer_[b] < producer_[a]) std::swap(a, b);
        if (last_use_[a] < producer_[b]) continue;
        const Step& step = plan.steps[producer_[b]];
        MF_CHECK(last_use_[a] == producer_[b] && step.in_place && step.inputs[0] == a &&
                     step.outputs[0] == b,
                 DataLoss, "arena slots ", a, " and ", b, " share bytes while both are alive");
      }
    }
    std::vector<bool> released(plan.slots.size(), false);
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const Step& step = plan.steps[s];
      if (step.in_place) {
        // Arena: the same bytes. Pooled (memory O0): the executor hands input 0's buffer to
        // output 0, so input 0 must be released here and be as big.
        MF_CHECK(!step.inputs.empty() && step.outputs.size() == 1, DataLoss, "step ", s,
                 " runs in place but has no input or not exactly one output");
        // What the planner asks before it shares bytes: the op may write over its input (or is
        // a view), the input is an intermediate whose last reader is this step, of the same dtype.
        const ir::OpDef& def = *step.node->def();
        MF_CHECK(def.has(ir::Trait::kView) || def.may_write_over_input(0), DataLoss, "step ", s,
                 " runs ", step.node->op(), " in place, which that op does not allow");
        const Slot& in = plan.slots[step.inputs[0]];
        const Slot& out = plan.slots[step.outputs[0]];
        MF_CHECK(in.kind != SlotKind::kParameter && in.kind != SlotKind::kConstant &&
                     !in.is_output && !out.is_output,
                 DataLoss, "step ", s,
                 " runs in place over a parameter, a constant or a graph output");
        MF_CHECK(last_use_[step.inputs[0]] == static_cast<int>(s), DataLoss, "step ", s,
                 " runs in place over slot ", step.inputs[0], ", which a later step still reads");
        MF_CHECK(in.type.dtype == out.type.dtype && in.bytes == out.bytes, DataLoss, "step ", s,
                 " runs in place between slots of different dtypes or sizes");
        const bool arena =
            in.kind == SlotKind::kArena && out.kind == SlotKind::kArena && in.offset == out.offset;
        const bool pooled = in.kind == SlotKind::kPooled && out.kind == SlotKind::kPooled &&
                            in.bytes == out.bytes && !in.is_output &&
                            std::find(step.release_after.begin(), step.release_after.end(),
                                      step.inputs[0]) != step.release_after.end();
        MF_CHECK(arena || pooled, DataLoss, "step ", s,
                 " runs in place but its input 0 and output 0 differ");
      }
      for (int r : step.release_after) {
        const int id = slot_id(plan, r, "released");
        const Slot& slot = plan.slots[id];
        MF_CHECK(slot.kind == SlotKind::kPooled && !slot.is_output && !released[id] &&
                     last_use_[id] <= static_cast<int>(s) && producer_[id] <= static_cast<int>(s),
                 DataLoss, "step ", s, " releases slot ", id,
                 ", which is not a pooled intermediate whose last use is over (or is released "
                 "twice)");
        released[id] = true;
      }
    }
  }

  static bool bytes_meet(const Slot& a, const Slot& b) {
    return a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
  }

  // Uses arena_ as check_memory left it.
  void check_ordering(const Plan& plan) {
    int last_effect = kBefore;
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const Step& step = plan.steps[s];
      const int si = static_cast<int>(s);
      auto depends = [&](int on, const char* why) {
        if (on == kBefore || on == si) return;
        MF_CHECK(std::binary_search(step.depends_on.begin(), step.depends_on.end(), on), DataLoss,
                 "step ", s, " does not wait for step ", on, " (", why, ")");
      };
      MF_CHECK(std::is_sorted(step.depends_on.begin(), step.depends_on.end()), DataLoss, "step ", s,
               ": its dependencies are not in order");
      for (int d : step.depends_on) {
        MF_CHECK(d >= 0 && d < si, DataLoss, "step ", s, " depends on step ", d,
                 ", which does not run before it");
      }
      for (int in : step.inputs) depends(producer_[in], "it reads that step's output");
      const ir::OpDef& def = *step.node->def();
      if (def.has(ir::Trait::kSideEffect) ||
          (def.has(ir::Trait::kControlFlow) && !def.has(ir::Trait::kFused))) {
        depends(last_effect, "side effects and control flow run in program order");
        last_effect = si;
      }
      for (int out : step.outputs) {
        const Slot& o = plan.slots[out];
        if (o.kind != SlotKind::kArena || o.bytes == 0) continue;
        for (int w : arena_) {
          if (w == out || producer_[w] >= si || last_use_[w] > si) continue;
          if (!bytes_meet(plan.slots[w], o)) continue;
          depends(producer_[w], "its output reuses bytes that step wrote");
          for (int r : readers_[w]) depends(r, "its output reuses bytes that step read");
        }
      }
    }
  }

  std::vector<const Plan*> pending_;  // subplans found on the way, still to check
  std::unordered_set<const Plan*> checked_;
  // Per plan being checked.
  std::vector<int> producer_, last_use_, constant_slot_;
  std::vector<int> arena_;  // arena slots that hold bytes
  std::vector<std::vector<int>> readers_;
  std::vector<bool> defined_;
  std::vector<std::pair<const ir::Node*, int>> step_of_;
};

}  // namespace

void check_plan(const runtime::Plan& plan) {
  PlanChecker().check_all(plan);
}

}  // namespace mf::passes
