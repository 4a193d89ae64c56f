#include "engine/engine_state.h"

#include <algorithm>
#include <mutex>

#include "base/logging.h"
#include "engine/io/print_file.h"
#include "runtime/eager_executor.h"
#include "runtime/memory_pool.h"

namespace mf::engine {
namespace {

struct CachedPolicy {
  std::mutex mutex;
  uint64_t version = ~uint64_t(0);
  std::shared_ptr<const context::Policy> policy;
};

CachedPolicy& cache() {
  static CachedPolicy* instance = new CachedPolicy();  // leaked: used by executors during exit
  return *instance;
}

void apply_to_runtime(const context::Policy& policy) {
  ensure_print_output(policy.print_file_path.value);
  runtime::PoolOptions pool;
  pool.max_bytes = policy.max_device_memory_bytes.value;
  pool.block_bytes = policy.mempool_block_bytes.value;
  runtime::default_pool().configure(pool);
  auto& executor = runtime::default_eager_executor();
  executor.set_synchronous(policy.pynative_synchronize.value);
  executor.set_run_on_caller(!policy.pynative_queue_thread.value);
  executor.set_intra_op_threads(policy.intra_op_threads.value);
  if (policy.mode.value == context::ExecutionMode::kPynative && policy.dump_level.value > 0) {
    // As MindSpore: PYNATIVE_MODE compiles only what is jit-compiled, so only that is dumped.
    log::warn_once("save_graphs:pynative",
                   "save_graphs=" + std::to_string(policy.dump_level.value) +
                       " in PYNATIVE_MODE: graphs are written only for jit-compiled cells and "
                       "functions (a JitConfig, set_jit, mf::jit); ops run one by one are not "
                       "compiled, so they write none. Use GRAPH_MODE to dump the whole network");
  }
}

}  // namespace

std::shared_ptr<const context::Policy> current_policy() {
  const context::Snapshot snapshot = context::snapshot();
  CachedPolicy& cached = cache();
  std::lock_guard lock(cached.mutex);
  if (cached.policy == nullptr || cached.version != snapshot.version()) {
    auto policy = std::make_shared<const context::Policy>(context::derive_policy(snapshot));
    apply_to_runtime(*policy);
    cached.policy = std::move(policy);
    cached.version = snapshot.version();
  }
  return cached.policy;
}

std::shared_ptr<runtime::Buffer> allocate_tensor_memory(size_t bytes, std::string_view op) {
  current_policy();  // a changed max_device_memory applies before this allocation
  return runtime::default_pool().allocate(std::max<size_t>(bytes, 1), op);
}

namespace {
thread_local bool forced_op_by_op = false;
}  // namespace

OpByOpScope::OpByOpScope(bool forced) : previous_(forced_op_by_op) {
  forced_op_by_op = forced;
}
OpByOpScope::~OpByOpScope() {
  forced_op_by_op = previous_;
}
bool op_by_op_forced() {
  return forced_op_by_op;
}

}  // namespace mf::engine
