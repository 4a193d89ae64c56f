#pragma once
// Source locations in compile-cache entries. A node's location ("layers.cc:82 in 'forward'") is not
// part of the cache key: editing code above a network's forward moves its lines without changing
// what it computes, and must not recompile it. So an entry must not carry the locations of the
// process that stored it either, or a later hit would name lines that have moved since in its error
// messages. Instead each stored node refers to the traced node whose location it had, by position
// in a fixed walk of the traced graph, and the loader takes the locations from the live trace:
// equal keys mean equal canonical forms, so the walks line up node for node.

#include <string>
#include <vector>

#include "ir/graph.h"

namespace mf::proto {
class CacheEntryPayload;  // compile_cache.proto; the generated header stays out of engine headers
}

namespace mf::engine {

// The traced graph's node locations: each graph's nodes in program order, then its subgraphs in
// insertion order, depth first (the order ir::canonical_form prints them).
std::vector<std::string> traced_locations(const ir::Graph& traced);

// Replaces each stored node's location that some traced node has by a reference to the first such
// traced node (payload.location_refs, one per node of payload.graph in the same walk; 0 keeps the
// node's own text, e.g. a location the passes wrote).
void unbind_locations(const std::vector<std::string>& traced, proto::CacheEntryPayload& payload);

// The reverse, with the live trace's locations. DataLoss when the references do not fit the graph
// or the trace.
void rebind_locations(const std::vector<std::string>& traced, proto::CacheEntryPayload& payload);

}  // namespace mf::engine
