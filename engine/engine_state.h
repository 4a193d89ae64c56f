#pragma once
// The engine's view of the context: the Policy derived from the current context snapshot,
// re-derived only when the context changes, and applied to the runtime (memory pool limits, the
// eager executor's mode and threads) at that moment. Everything the engine decides reads it from
// here.

#include <memory>

#include "context/policy.h"

namespace mf::engine {

// The Policy in effect now. Cheap when the context has not changed since the last call.
std::shared_ptr<const context::Policy> current_policy();

}  // namespace mf::engine
