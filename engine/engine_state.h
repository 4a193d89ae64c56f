#pragma once
// The engine's view of the context: the Policy derived from the current context snapshot,
// re-derived only when the context changes, and applied to the runtime (memory pool limits, the
// eager executor's mode and threads) at that moment. Everything the engine decides reads it from
// here.

#include <memory>

#include "context/policy.h"
#include "runtime/memory_pool.h"

namespace mf::engine {

// The Policy in effect now. Cheap when the context has not changed since the last call.
std::shared_ptr<const context::Policy> current_policy();

// Allocates tensor memory from the pool under the limits in effect now (a zero-byte request gets
// one byte, so every tensor has an address). `op` names the requester in an OutOfMemory message.
std::shared_ptr<runtime::Buffer> allocate_tensor_memory(size_t bytes, std::string_view op);

// Within its lifetime, on this thread, cells run op by op whatever the mode and their jit marks:
// the reference run of `mf bisect`, without touching the context. OpByOpScope(false) lifts an
// enclosing one (a jit cell's compiled step inside a tape's recording).
class OpByOpScope {
 public:
  explicit OpByOpScope(bool forced = true);
  ~OpByOpScope();
  OpByOpScope(const OpByOpScope&) = delete;
  OpByOpScope& operator=(const OpByOpScope&) = delete;

 private:
  bool previous_;
};
bool op_by_op_forced();

}  // namespace mf::engine
