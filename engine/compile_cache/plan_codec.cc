// runtime::Plan <-> proto::CachePlan (see plan_codec.h for why this lives in the cache).

#include "engine/compile_cache/plan_codec.h"

#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "compile_cache.pb.h"
#include "ir/serialize.h"
#include "passes/plan_check.h"
#include "passes/plan_memory.h"

namespace mf::engine::detail {

namespace {

// Writes a plan and, into the payload's table, each subplan once: a subgraph named by several
// steps, or by itself through nested control flow, is one table entry named by index.
class PlanWriter {
 public:
  explicit PlanWriter(proto::CacheEntryPayload& payload) : payload_(payload) {}

  void write(const runtime::Plan& plan, proto::CachePlan& out) {
    std::map<const ir::Node*, size_t> positions;
    if (plan.graph != nullptr) {
      out.set_graph(plan.graph->name());
      for (const ir::Node& node : plan.graph->nodes()) positions.emplace(&node, positions.size());
    }
    for (const runtime::Slot& slot : plan.slots) {
      auto* s = out.add_slots();
      s->set_kind(static_cast<std::uint32_t>(slot.kind));
      s->set_index(slot.index);
      s->set_offset(slot.offset);
      s->set_bytes(slot.bytes);
      s->set_is_output(slot.is_output);
      ir::type_to_proto(slot.type, *s->mutable_type());
    }
    for (const runtime::Step& step : plan.steps) {
      auto* s = out.add_steps();
      auto it = positions.find(step.node);
      s->set_node_position(it == positions.end() ? ~std::uint64_t{0} : it->second);
      for (int v : step.inputs) s->add_inputs(v);
      for (int v : step.outputs) s->add_outputs(v);
      for (int v : step.release_after) s->add_release_after(v);
      for (int v : step.depends_on) s->add_depends_on(v);
      s->set_in_place(step.in_place);
      for (const auto& sub : step.subplans) s->add_subplans(index_of(*sub));
    }
    for (int v : plan.parameters) out.add_parameters(v);
    for (int v : plan.outputs) out.add_outputs(v);
    out.set_arena_bytes(plan.arena_bytes);
    out.set_planned_peak_bytes(plan.planned_peak_bytes);
  }

 private:
  int index_of(const runtime::Plan& sub) {
    if (auto it = index_.find(&sub); it != index_.end()) return it->second;
    const int index = payload_.subplans_size();
    index_.emplace(&sub, index);                      // before writing it: it may name itself
    proto::CachePlan* out = payload_.add_subplans();  // RepeatedPtrField: the pointer stays valid
    write(sub, *out);
    return index;
  }

  proto::CacheEntryPayload& payload_;
  std::map<const runtime::Plan*, int> index_;
};

// Rebuilds the stored plans against the loaded graph. What this code indexes with (node positions,
// slot kinds, subplan indices and the subgraphs they name) is checked here; slot ids and everything
// else passes::check_plan checks afterwards, before anything runs the plan. A subplan is built
// once; a recursive reference points at the plan being built without owning it, as the planner
// does.
class PlanReader {
 public:
  explicit PlanReader(const proto::CacheEntryPayload& payload)
      : payload_(payload),
        built_(static_cast<size_t>(payload.subplans_size())),
        building_(static_cast<size_t>(payload.subplans_size()), nullptr),
        graphs_(static_cast<size_t>(payload.subplans_size()), nullptr) {}

  void read(const proto::CachePlan& in, const ir::Graph& graph, runtime::Plan& out) {
    MF_CHECK(in.graph() == graph.name(), DataLoss, "a stored plan is of graph @", in.graph(),
             ", where @", graph.name(), " was expected");
    out.graph = &graph;
    std::vector<const ir::Node*> nodes;
    nodes.reserve(graph.num_nodes());
    for (const ir::Node& node : graph.nodes()) nodes.push_back(&node);
    out.slots.resize(static_cast<size_t>(in.slots_size()));
    for (int i = 0; i < in.slots_size(); ++i) {
      const proto::CachePlanSlot& s = in.slots(i);
      runtime::Slot& slot = out.slots[static_cast<size_t>(i)];
      MF_CHECK(s.kind() <= static_cast<std::uint32_t>(runtime::SlotKind::kArena), DataLoss, "slot ",
               i, " has unknown kind ", s.kind());
      slot.kind = static_cast<runtime::SlotKind>(s.kind());
      slot.index = s.index();
      slot.offset = s.offset();
      slot.bytes = s.bytes();
      slot.is_output = s.is_output();
      slot.type = ir::type_from_proto(s.type());
    }
    out.steps.resize(static_cast<size_t>(in.steps_size()));
    for (int i = 0; i < in.steps_size(); ++i) {
      const proto::CachePlanStep& s = in.steps(i);
      runtime::Step& step = out.steps[static_cast<size_t>(i)];
      MF_CHECK(s.node_position() < nodes.size(), DataLoss, "step ", i, " names node ",
               s.node_position(), " of ", nodes.size());
      step.node = nodes[s.node_position()];
      // graph_from_proto keeps unregistered ops (the verifier names them); a step must run one
      // this build has, before anything looks at its definition (found by cache_entry_fuzz).
      MF_CHECK(step.node->def() != nullptr, DataLoss, "step ", i, " runs op '",
               echo(step.node->op(), 80), "', which this build does not register");
      step.inputs.assign(s.inputs().begin(), s.inputs().end());
      step.outputs.assign(s.outputs().begin(), s.outputs().end());
      step.release_after.assign(s.release_after().begin(), s.release_after().end());
      step.depends_on.assign(s.depends_on().begin(), s.depends_on().end());
      step.in_place = s.in_place();
      if (s.subplans_size() == 0) continue;
      const std::vector<std::string> names = passes::subgraph_names(*step.node);
      MF_CHECK(static_cast<size_t>(s.subplans_size()) == names.size(), DataLoss, "step ", i,
               " has ", s.subplans_size(), " subplans for ", names.size(), " subgraphs");
      for (size_t k = 0; k < names.size(); ++k) {
        const ir::Graph* sub = graph.resolve_subgraph(names[k]);
        MF_CHECK(sub != nullptr, DataLoss, "step ", i, " names subgraph @", names[k],
                 ", which the stored graph lacks");
        step.subplans.push_back(subplan(s.subplans(static_cast<int>(k)), *sub));
      }
    }
    out.parameters.assign(in.parameters().begin(), in.parameters().end());
    out.outputs.assign(in.outputs().begin(), in.outputs().end());
    out.arena_bytes = in.arena_bytes();
    out.planned_peak_bytes = in.planned_peak_bytes();
  }

 private:
  std::shared_ptr<const runtime::Plan> subplan(int index, const ir::Graph& graph) {
    MF_CHECK(index >= 0 && index < payload_.subplans_size(), DataLoss, "subplan ", index,
             " is out of range");
    const auto i = static_cast<size_t>(index);
    MF_CHECK(graphs_[i] == nullptr || graphs_[i] == &graph, DataLoss, "subplan ", index,
             " is named for two subgraphs");
    graphs_[i] = &graph;
    if (built_[i]) return built_[i];
    if (building_[i] != nullptr) {
      // Recursion: the plan is owned further up this chain of subplans, which outlives the edge.
      return std::shared_ptr<const runtime::Plan>(std::shared_ptr<const runtime::Plan>(),
                                                  building_[i]);
    }
    auto plan = std::make_shared<runtime::Plan>();
    building_[i] = plan.get();
    read(payload_.subplans(index), graph, *plan);
    building_[i] = nullptr;
    built_[i] = plan;
    return plan;
  }

  const proto::CacheEntryPayload& payload_;
  std::vector<std::shared_ptr<const runtime::Plan>> built_;
  std::vector<runtime::Plan*> building_;
  std::vector<const ir::Graph*> graphs_;
};

}  // namespace

void plan_to_payload(const runtime::Plan& plan, proto::CacheEntryPayload& payload) {
  PlanWriter(payload).write(plan, *payload.mutable_plan());
}

// The stored plan of `graph`, proven safe to run on it (DataLoss naming the first problem).
std::shared_ptr<const runtime::Plan> plan_from_payload(const proto::CacheEntryPayload& payload,
                                                       const ir::Graph& graph) {
  auto plan = std::make_shared<runtime::Plan>();
  try {
    PlanReader(payload).read(payload.plan(), graph, *plan);
    passes::check_plan(*plan);
  } catch (Error& e) {
    e.add_context("while checking the stored memory plan");
    throw;
  }
  return plan;
}

}  // namespace mf::engine::detail
