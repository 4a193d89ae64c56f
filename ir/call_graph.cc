#include "ir/call_graph.h"

#include <unordered_map>
#include <vector>

namespace mf::ir {

CallDepth call_depth(const Graph& graph) {
  // The subgraphs each graph's nodes name, resolved as the executors resolve them.
  auto callees = [](const Graph& g) {
    std::vector<const Graph*> out;
    for (const Node& node : g.nodes()) {
      for (const auto& [name, value] : node.attrs()) {
        const auto* target = std::get_if<std::string>(&value);
        if (target == nullptr || !names_subgraph(name)) continue;
        if (const Graph* sub = g.resolve_subgraph(*target)) out.push_back(sub);
      }
    }
    return out;
  };
  // Longest path over the call graph by an explicit post-order walk; an edge back to a graph on
  // the walk's path is recursion and adds nothing.
  struct Frame {
    const Graph* graph;
    std::vector<const Graph*> next;
    size_t at = 0;
  };
  enum class State { kOnPath, kDone };
  std::unordered_map<const Graph*, State> state;
  std::unordered_map<const Graph*, std::pair<int64_t, const Graph*>> below;  // depth, bottom
  CallDepth out;
  std::vector<Frame> path;
  path.push_back({&graph, callees(graph)});
  state[&graph] = State::kOnPath;
  while (!path.empty()) {
    Frame& top = path.back();
    if (top.at < top.next.size()) {
      const Graph* sub = top.next[top.at++];
      const auto it = state.find(sub);
      if (it == state.end()) {
        state[sub] = State::kOnPath;
        std::vector<const Graph*> next = callees(*sub);
        path.push_back({sub, std::move(next)});  // `top` is invalid from here
      } else if (it->second == State::kOnPath) {
        out.recursive = true;
      }
      continue;
    }
    std::pair<int64_t, const Graph*> best{1, top.graph};
    for (const Graph* sub : top.next) {
      const auto found = below.find(sub);
      if (found != below.end() && found->second.first + 1 > best.first) {
        best = {found->second.first + 1, found->second.second};
      }
    }
    below[top.graph] = best;
    state[top.graph] = State::kDone;
    path.pop_back();
  }
  out.depth = below[&graph].first;
  out.deepest = below[&graph].second->name();
  return out;
}

}  // namespace mf::ir
