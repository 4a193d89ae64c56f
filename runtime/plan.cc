#include "runtime/plan.h"

#include <algorithm>
#include <sstream>

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
bool uses_arena(const Plan& plan) {
  if (plan.arena_bytes > 0) return true;
  for (const Slot& s : plan.slots) {
    if (s.kind == SlotKind::kArena) return true;
  }
  for (const Step& step : plan.steps) {
    for (const auto& sub : step.subplans) {
      if (sub != nullptr && uses_arena(*sub)) return true;
    }
  }
  return false;
}

}  // namespace

std::string_view Plan::memory_regime() const {
  return uses_arena(*this) ? kArenaRegime : kPooledRegime;
}

// Every line starts with "# " so the text can be appended to an .ir dump and still parse.
std::string Plan::describe() const {
  std::ostringstream out;
  out << "# Memory plan of graph @" << (graph != nullptr ? graph->name() : std::string("?")) << ": "
      << slots.size() << " slots, " << steps.size() << " steps\n";
  out << "# memory: " << memory_regime() << "\n";
  out << "# arena_bytes: " << arena_bytes << "\n";
  out << "# planned_peak_bytes: " << planned_peak_bytes << "\n";
  out << "# parameters: [" << slot_list(parameters) << "]  outputs: [" << slot_list(outputs)
      << "]\n";
  out << "# slots:\n";
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    out << "#   $" << i << " " << kind_name(s.kind) << " " << ir::type_to_string(s.type)
        << " bytes=" << s.bytes;
    if (s.kind == SlotKind::kParameter || s.kind == SlotKind::kConstant)
      out << " index=" << s.index;
    if (s.kind == SlotKind::kArena) out << " offset=" << s.offset;
    if (s.is_output) out << " output";
    out << "\n";
  }
  out << "# steps:\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
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
  // Each subplan once, after its first user (recursive references are not followed twice).
  std::vector<const Plan*> seen = {this};
  for (const Step& s : steps) {
    for (const auto& sub : s.subplans) {
      if (sub == nullptr || std::find(seen.begin(), seen.end(), sub.get()) != seen.end()) continue;
      seen.push_back(sub.get());
      out << sub->describe();
    }
  }
  return out.str();
}

}  // namespace mf::runtime
