#pragma once
// The memory plan of a compiled graph (runtime::Plan) to and from the cache's payload
// (proto::CachePlan in proto/compile_cache.proto). It lives here, not beside the IR's serializer
// (ir/serialize.h): the graph's proto is the IR's own format, used by more than the cache, while
// the plan's is a cache format only, whose messages exist for the entry (the plan table with each
// subplan once, nodes named by their position in the stored graph), and whose reader must prove a
// loaded plan safe (passes::check_plan), which the ir layer cannot call.

#include <memory>

#include "ir/graph.h"
#include "runtime/plan.h"

namespace mf::proto {
class CacheEntryPayload;  // compile_cache.proto; the generated header stays out of engine headers
}

namespace mf::engine::detail {

// Writes `plan` into payload.plan and each of its subplans once into payload.subplans.
void plan_to_payload(const runtime::Plan& plan, proto::CacheEntryPayload& payload);

// The stored plan of `graph`, proven safe to run on it (DataLoss naming the first problem).
std::shared_ptr<const runtime::Plan> plan_from_payload(const proto::CacheEntryPayload& payload,
                                                       const ir::Graph& graph);

}  // namespace mf::engine::detail
