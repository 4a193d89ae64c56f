#include "runtime/plan.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>
#include <vector>

#include "ir/printer.h"

namespace mf::runtime {
namespace {

std::string_view kind_name(SlotKind kind) {
  switch (kind) {
    case SlotKind::kParameter:
      return "parameter";
    case SlotKind::kConstant:
      return "constant";
    case SlotKind::kPooled:
      return "pooled";
    case SlotKind::kArena:
      return "arena";
  }
  return "?";
}

std::string slot_list(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(ids[i]);
  return out;
}

}  // namespace

namespace {

// Whether `plan` or a subplan a control-flow step of it runs places anything in an arena: a graph
// whose intermediates all live in called subgraphs (the transformer's main graph is one call) is
// planned in those subgraphs' arenas.
// `plan` and every plan reachable from it through subplans, each once, from a worklist: a
// recursive graph's plan is its own subplan, and calls may nest deeper than the stack.
std::vector<const Plan*> reachable_plans(const Plan& root) {
  std::vector<const Plan*> order{&root};
  std::unordered_set<const Plan*> seen{&root};
  for (size_t i = 0; i < order.size(); ++i) {
    for (const Step& step : order[i]->steps) {
      for (const auto& sub : step.subplans) {
        if (sub != nullptr && seen.insert(sub.get()).second) order.push_back(sub.get());
      }
    }
  }
  return order;
}

bool uses_arena(const Plan& root) {
  for (const Plan* plan : reachable_plans(root)) {
    if (plan->arena_bytes > 0) return true;
    for (const Slot& s : plan->slots) {
      if (s.kind == SlotKind::kArena) return true;
    }
  }
  return false;
}

}  // namespace

std::string_view Plan::memory_regime() const {
  return uses_arena(*this) ? kArenaRegime : kPooledRegime;
}

// Every line starts with "# " so the text can be appended to an .ir dump and still parse.
namespace {

// One plan's text, without its subplans.
std::string describe_one(const Plan& plan) {
  std::ostringstream out;
  out << "# Memory plan of graph @"
      << (plan.graph != nullptr ? plan.graph->name() : std::string("?")) << ": "
      << plan.slots.size() << " slots, " << plan.steps.size() << " steps\n";
  out << "# memory: " << plan.memory_regime() << "\n";
  out << "# arena_bytes: " << plan.arena_bytes << "\n";
  out << "# planned_peak_bytes: " << plan.planned_peak_bytes << "\n";
  out << "# parameters: [" << slot_list(plan.parameters) << "]  outputs: ["
      << slot_list(plan.outputs) << "]\n";
  out << "# slots:\n";
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const Slot& s = plan.slots[i];
    out << "#   $" << i << " " << kind_name(s.kind) << " " << ir::type_to_string(s.type)
        << " bytes=" << s.bytes;
    if (s.kind == SlotKind::kParameter || s.kind == SlotKind::kConstant)
      out << " index=" << s.index;
    if (s.kind == SlotKind::kArena) out << " offset=" << s.offset;
    if (s.is_output) out << " output";
    out << "\n";
  }
  out << "# steps:\n";
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    out << "#   " << i << ": " << (s.node != nullptr ? s.node->op() : std::string("?")) << " ("
        << slot_list(s.inputs) << ") -> (" << slot_list(s.outputs) << ")";
    if (s.in_place) out << " in_place";
    if (!s.release_after.empty()) out << " release [" << slot_list(s.release_after) << "]";
    if (!s.depends_on.empty()) out << " after [" << slot_list(s.depends_on) << "]";
    for (const auto& sub : s.subplans) {
      out << " @" << (sub != nullptr && sub->graph != nullptr ? sub->graph->name() : "?");
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace

// Each plan once, in the order it is first reached (recursive references are not followed twice).
std::string Plan::describe() const {
  std::string out;
  for (const Plan* plan : reachable_plans(*this)) out += describe_one(*plan);
  return out;
}

}  // namespace mf::runtime
