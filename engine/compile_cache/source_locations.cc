#include "engine/compile_cache/source_locations.h"

#include <string_view>
#include <unordered_map>

#include "base/error.h"
#include "compile_cache.pb.h"

namespace mf::engine {
namespace {

void collect(const ir::Graph& graph, std::vector<std::string>& out) {
  for (const ir::Node& node : graph.nodes()) out.push_back(node.location());
  for (const ir::Graph* sub : graph.subgraphs()) collect(*sub, out);
}

using FirstTraced = std::unordered_map<std::string_view, std::uint32_t>;  // 1 + position

void unbind(const FirstTraced& first, proto::IrGraph& graph, proto::CacheEntryPayload& payload) {
  for (proto::IrNode& node : *graph.mutable_nodes()) {
    std::uint32_t ref = 0;
    if (!node.location().empty()) {
      if (auto it = first.find(node.location()); it != first.end()) {
        ref = it->second;
        node.clear_location();
      }
    }
    payload.add_location_refs(ref);
  }
  for (proto::IrGraph& sub : *graph.mutable_subgraphs()) unbind(first, sub, payload);
}

void rebind(const std::vector<std::string>& traced, proto::IrGraph& graph,
            const proto::CacheEntryPayload& payload, int& next) {
  for (proto::IrNode& node : *graph.mutable_nodes()) {
    MF_CHECK(next < payload.location_refs_size(), DataLoss, "the stored graph has more nodes than ",
             payload.location_refs_size(), " location references");
    const std::uint32_t ref = payload.location_refs(next++);
    if (ref == 0) continue;
    MF_CHECK(ref <= traced.size(), DataLoss, "location reference ", ref, " is beyond the trace's ",
             traced.size(), " nodes");
    node.set_location(traced[ref - 1]);
  }
  for (proto::IrGraph& sub : *graph.mutable_subgraphs()) rebind(traced, sub, payload, next);
}

}  // namespace

std::vector<std::string> traced_locations(const ir::Graph& traced) {
  std::vector<std::string> out;
  out.reserve(traced.num_nodes());
  collect(traced, out);
  return out;
}

void unbind_locations(const std::vector<std::string>& traced, proto::CacheEntryPayload& payload) {
  FirstTraced first;
  first.reserve(traced.size());
  for (size_t i = 0; i < traced.size(); ++i) {
    if (!traced[i].empty()) first.emplace(traced[i], static_cast<std::uint32_t>(i + 1));
  }
  payload.clear_location_refs();
  unbind(first, *payload.mutable_graph(), payload);
}

void rebind_locations(const std::vector<std::string>& traced, proto::CacheEntryPayload& payload) {
  int next = 0;
  rebind(traced, *payload.mutable_graph(), payload, next);
  MF_CHECK(next == payload.location_refs_size(), DataLoss, "the stored graph has ", next,
           " nodes but ", payload.location_refs_size(), " location references");
}

}  // namespace mf::engine
